// The legacy (Go) side of `cargo xtask bench`: the way pkg/client did each thing,
// measured on the same machine, in the same run, on the same key material.
//
// A plain Go module: built with Go 1.26 (GOTOOLCHAIN=local) and its modules from the
// Go module proxy (the environment's GOPROXY), checked against go.sum (-mod=readonly).
module platformbench/legacy

go 1.26

require github.com/go-jose/go-jose/v4 v4.1.9
