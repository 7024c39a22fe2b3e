// The legacy (Go) side of `cargo xtask bench`: the way pkg/client did each thing,
// measured on the same machine, in the same run, on the same key material.
//
// Built offline: xtask points the two modules below at Debian's packaged sources
// (golang-github-go-jose-go-jose-dev and its dependency golang-golang-x-crypto-dev)
// with `go mod edit -replace` in a copy of this file, with GOPROXY=off and GOFLAGS=-mod=mod.
module platformbench/legacy

go 1.23

require github.com/go-jose/go-jose/v4 v4.0.5
