//go:build tools

// Package coredns records, for go.mod, CoreDNS: the real cluster's DNS
// add-on (e2e/cluster), built from source by `make cluster-binaries`.
package coredns

import _ "github.com/coredns/coredns"
