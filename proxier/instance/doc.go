// Package instance makes sure that one nftproxy daemon at a time programs
// a node's network namespace. Two that differ in a flag or an input (a
// rolling update with maxSurge, a run by hand beside the DaemonSet) would
// otherwise rewrite each other's table in a loop. The lock is an abstract
// Unix socket bound in the namespace: it needs no file shared between
// containers, and the kernel releases it when its holder exits, however
// it exits.
package instance
