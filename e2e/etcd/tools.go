//go:build tools

// Package etcd pins etcd's server module so that e2e tests can build etcd
// (its root package is etcd's main) with `go build go.etcd.io/etcd/server/v3`.
package etcd

import _ "go.etcd.io/etcd/server/v3"
