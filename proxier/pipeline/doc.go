// Package pipeline does one sync of the node's Service rules, as the
// engine (package proxier) decided it: a snapshot of the changed Services
// from the store, one named read of the kernel when the tables are
// rewritten (observe), a plan that does no I/O (the desired ruleset, its
// destination claims and the transactions that reach it) and the apply,
// one atomic transaction per family, or a stream of them for a cold sync.
package pipeline
