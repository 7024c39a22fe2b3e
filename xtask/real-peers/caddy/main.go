// Command caddy is Caddy with its standard modules, as its own cmd/caddy/main.go
// builds it: the gateway in front of svc-tls's serving half in the gateway tests.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func main() {
	caddycmd.Main()
}
