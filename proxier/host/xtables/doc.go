// Package xtables reads and rewrites legacy iptables (x_tables) tables
// without iptables binaries: the blob IPT_SO_GET_ENTRIES returns, parsed
// into entries, and IPT_SO_SET_REPLACE. The layout code is pure; the
// socket options are in the _linux.go files.
package xtables
