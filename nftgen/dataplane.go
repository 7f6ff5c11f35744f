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
	// DeleteTable removes the family's table and everything in it. A
	// missing table is not an error.
	DeleteTable(ctx context.Context, f Family) error
}

// StreamApplier is a Dataplane that applies a stream of transactions in
// order, each atomically, preparing the next while the last is committed
// (a streamed cold sync). after is called once each transaction is in the
// kernel; an error from it stops the stream there.
type StreamApplier interface {
	ApplyStream(ctx context.Context, txs iter.Seq[*Transaction], after func(*Transaction) error) error
}

// IsNotFound reports whether err says that an object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, syscall.ENOENT) }
