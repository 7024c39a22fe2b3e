// The Go verifier of svc-tls's principal interop test: go-jose, as the Go services
// verify X-Principal. A plain Go module, built by the test with Go 1.26
// (GOTOOLCHAIN=local) and its modules from the Go module proxy, checked against go.sum
// (-mod=readonly), as xtask builds benches/go.
module platformtest/goverify

go 1.26

require github.com/go-jose/go-jose/v4 v4.1.9
