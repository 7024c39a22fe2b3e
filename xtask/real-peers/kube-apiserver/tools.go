//go:build tools

// Package tools names the command this module builds, so that `go mod tidy` keeps its
// requirements; the build itself is `go build k8s.io/kubernetes/cmd/kube-apiserver`.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
