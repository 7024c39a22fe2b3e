// Command etcd is the etcd server: etcdmain.Main, as etcd's own main.go runs it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
