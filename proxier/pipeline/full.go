package pipeline

// Reasons a family's table is rewritten that the pipeline finds itself
// (see familyFullReason); the engine gives every other reason.
const (
	// FullUnknown: the pipeline does not know what the table holds (its
	// first sync, or its last one failed).
	FullUnknown = "table state unknown"
	// FullLargeCluster: the family's endpoint count crossed kube-proxy's
	// large cluster threshold.
	FullLargeCluster = "large cluster mode changed"
)

// familyFullReason decides, for one family of a sync, whether its table is
// rewritten and why, or returns "" to patch what changed: the sync's
// reason (the engine's) applies to every family; otherwise a table the
// pipeline does not know (its last sync failed) is rewritten, and so is one
// whose endpoint count crossed kube-proxy's large cluster threshold, which
// changes every Service's comments. It is the only decision the pipeline
// makes itself; largeFlipped is asked (it counts the changed Services'
// endpoints) only for a known table on a patching sync.
func familyFullReason(syncReason string, known bool, largeFlipped func() bool) string {
	switch {
	case syncReason != "":
		return syncReason
	case !known:
		return FullUnknown
	case largeFlipped():
		return FullLargeCluster
	}
	return ""
}
