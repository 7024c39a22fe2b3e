// The Go verifier of svc-tls's principal interop test: go-jose, as the Go services
// verify X-Principal. Built offline by the test against Debian's packaged sources
// (`go mod edit -replace`, GOPROXY=off), as xtask builds benches/go.
module platformtest/goverify

go 1.23

require github.com/go-jose/go-jose/v4 v4.0.5
