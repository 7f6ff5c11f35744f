package nftgen

import (
	"context"
	"errors"
	"iter"
	"syscall"
)

// Dataplane applies transactions to nftproxy's tables. Netlink is the real
// implementation; Fake is an in-memory one for tests.
type Dataplane interface {
	// Apply runs tx as one atomic batch: on error nothing was changed.
	Apply(ctx context.Context, tx *Transaction) error
	// Inventory lists the chains and named maps of the family's table, or
	// returns nil and no error when the table does not exist. expected
	// names the chains the caller is about to program: a dataplane may
	// look those up by name and list the whole table only when it holds
	// anything else (the kernel's chain listing is quadratic). It reads
	// the kernel, so it is kept off the hot path.
	Inventory(ctx context.Context, f Family, expected []string) (*Inventory, error)
	// Read reads the family's table back and decodes it, or returns nil
	// and no error when the table does not exist. Objects it cannot
	// decode are listed in the result's Unknown.
	Read(ctx context.Context, f Family) (*TableState, error)
	// ReadCompact is Read for a reconcile of large tables, each shard
	// table in the result's Shards: finish is given the rules read of
	// each chain once the chain is read, and the result holds what it
	// returns instead (LiveDigests.Finish keeps digests of them and has
	// the chain omitted), so that the decoded rules of a whole table
	// never exist at once. finish may be called from several goroutines
	// at once.
	ReadCompact(ctx context.Context, f Family, finish ChainFinish) (*TableState, error)
	// ReadTable is ReadCompact of one of the family's tables: table 0 is
	// the main table (its shards not read), i the shard ShardTable(i). It
	// returns nil and no error when that table does not exist. It is the
	// read of the rolling check, which compares one table at a time.
	ReadTable(ctx context.Context, f Family, table int, finish ChainFinish) (*TableState, error)
	// ReadLeaving is Read for a view printed a chain at a time: the
	// Services' chains (IsServiceChain) are listed in the result's Unread,
	// not in Chains, and the ChainRules returned reads their rules when
	// asked. An endpoint chain that jumps to a chain outside the layout
	// all the same hides that chain: it is counted as Unreached in a table
	// too large to list.
	ReadLeaving(ctx context.Context, f Family) (*TableState, ChainRules, error)
	// DeleteTable removes the family's table and everything in it. A
	// missing table is not an error.
	DeleteTable(ctx context.Context, f Family) error
	// ApplyStream applies a stream of transactions in order, each
	// atomically, preparing the next while the last is committed (a
	// streamed cold sync). after is called with the number of operations
	// of each transaction once it is in the kernel; an error from it
	// stops the stream there. A transaction may be dropped as soon as it
	// is encoded.
	ApplyStream(ctx context.Context, txs iter.Seq[*Transaction], after func(ops int) error) error
	// ElementCounts returns the number of elements of each named map of
	// the family's table (the endpoint maps a dataplane may create for
	// its own use excluded), for telling cheaply whether another process
	// changed them.
	ElementCounts(ctx context.Context, f Family) (map[string]int, error)
	// Counters returns the packet counts of the family's named counters.
	Counters(ctx context.Context, f Family) (map[string]uint64, error)
	// Watch reports, until ctx ends, each transaction another process
	// commits that touches nftproxy's tables, or may have. The channel is
	// closed when ctx ends or the watch cannot go on.
	Watch(ctx context.Context) (<-chan Change, error)
	// WriteHandover writes the family's handover table from spec (see
	// HandoverSpec), replacing an earlier one: for spec.TTL it serves a new
	// connection to a destination of the family's table with the endpoints
	// nftproxy last programmed, or holds it when it cannot, which bridges
	// the moment between kube-proxy's start deleting nftproxy's table and
	// kube-proxy's first sync (a rollback). It returns the number of
	// destinations held; none, and nothing written, when the family's table
	// does not exist.
	WriteHandover(ctx context.Context, f Family, spec *HandoverSpec) (int, error)
	// DeleteHandover deletes the family's handover table; a missing one is
	// not an error.
	DeleteHandover(ctx context.Context, f Family) error
}

// Change is a committed nftables transaction made by another process that
// touched nftproxy's tables, or may have (element changes do not name
// their table).
type Change struct {
	// Process is the name and PID of the process that committed it.
	Process string
	// Ours is true when a table, chain, rule or set of nftproxy's table
	// changed; false when only set elements somewhere changed.
	Ours bool
	// What describes the first change.
	What string
	// Lost is true when the monitor fell behind and the kernel dropped
	// notifications (ENOBUFS): any change may have been missed, so the
	// caller should check the table. A commit of a million objects, such
	// as nftproxy's own full sync at 30,000 Services, does this. The watch
	// continues on a new subscription.
	Lost bool
	// Missed is true when other processes committed while nftproxy held
	// the monitor out of the multicast group for a commit of its own (see
	// quiet): what they changed is unknown, so the table needs a full
	// check. Lost is set too.
	Missed bool
}

// IsNotFound reports whether err says that an object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, syscall.ENOENT) }
