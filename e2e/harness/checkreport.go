package harness

// CheckReport is scaleprobe's measure of the periodic check of the loaded
// tables (-check), as the bench reads it back: the rolling check, a table
// a step, against the full sync of every table that the hourly check was
// before it, and what a change waits while the rolling check's steps run
// back to back, as the daemon runs them.
type CheckReport struct {
	// Tables is the number of tables (the main table and its shards).
	Tables int `json:"tables"`
	// Main and Shard are the steps of the main table and the shards'
	// median and slowest step, each with the engine's lock held; Round is
	// all steps together.
	MainSeconds        float64 `json:"main_seconds"`
	ShardMedianSeconds float64 `json:"shard_median_seconds"`
	ShardMaxSeconds    float64 `json:"shard_max_seconds"`
	RoundSeconds       float64 `json:"round_seconds"`
	// RecomputeMax is the slowest sync after a step, which recomputes
	// that table's Services from the model (and writes nothing).
	RecomputeMaxSeconds float64 `json:"recompute_max_seconds"`
	// Full is the full sync of every live table that the hourly check
	// was: it held every change up for as long.
	FullSeconds float64 `json:"full_seconds"`
	// ElementCount is the count of every table's map elements that a
	// periodic sync takes where it still does (see proxier's policy).
	ElementCountSeconds float64 `json:"element_count_seconds"`
	// Changes one-Service changes were made, each applied and synced at
	// once, while periodic syncs, each followed by a step, ran back to
	// back: the median and the slowest time from the change to its
	// sync's end.
	Changes             int     `json:"changes"`
	ChangeMedianSeconds float64 `json:"change_median_seconds"`
	ChangeMaxSeconds    float64 `json:"change_max_seconds"`
}
