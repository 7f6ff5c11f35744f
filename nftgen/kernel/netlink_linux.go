//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
)

var _ nftgen.Dataplane = (*Netlink)(nil)

// Netlink is the Dataplane that programs the kernel through
// github.com/google/nftables. Each Apply is a single netlink batch, which the
// kernel commits atomically.
type Netlink struct {
	// netnsFd is the network namespace to program, or -1 for the current
	// one.
	netnsFd int
	// sentMessages and sentBytes add up what Apply committed.
	sentMessages, sentBytes int
	// fullListings counts the Reads that could not find every chain by
	// following jumps and listed the whole table (slow at scale: the
	// kernel restarts a chain dump for every buffer).
	fullListings atomic.Int64
	// listingLimit replaces listingMaxChains when set (tests).
	listingLimit int
	// monitorReadBuffer is the receive buffer of Watch's socket.
	monitorReadBuffer int
	// blocks are the free blocks of the batches (see wireBatch).
	blocks blockPool
	// batchSeq numbers the messages of the batches sendBatch sends.
	batchSeq uint32

	// mu guards the two sockets kept open: lasting, for listings and
	// deletions, and batches, for transactions. Closing an nftables
	// socket makes the kernel wait for its deferred destruction work and
	// an RCU grace period (nft_rcv_nl_event), so a socket per commit costs
	// each commit that wait; on a loaded machine it stalled the fuzzer.
	mu      sync.Mutex
	lasting *nftables.Conn
	// batches is the socket that commits transactions (see sendBatch).
	batches *netlink.Conn

	// monMu guards monitor, the socket of the running drift monitor, which
	// quiet takes out of the multicast group during a commit (and holds
	// across the commit); missed carries what Watch must report as Lost.
	monMu   sync.Mutex
	monitor *netlink.Conn
	missed  chan string
}

// NewNetlink returns a Dataplane for the current network namespace.
func NewNetlink() *Netlink { return newNetlink(-1) }

func newNetlink(fd int) *Netlink {
	Reserve()
	return &Netlink{netnsFd: fd,
		monitorReadBuffer: defaultMonitorReadBuffer, missed: make(chan string, 1)}
}

// NewNetlinkInNamespace returns a Dataplane for the network namespace at
// path (e.g. /run/netns/NAME). The caller keeps the returned file open for
// as long as the Dataplane is used and closes it afterwards.
func NewNetlinkInNamespace(path string) (*Netlink, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open network namespace: %w", err)
	}
	return newNetlink(int(f.Fd())), f, nil
}

// connOptions returns the options that put a connection into the
// namespace this Netlink programs.
func (n *Netlink) connOptions() []nftables.ConnOption {
	if n.netnsFd >= 0 {
		return []nftables.ConnOption{nftables.WithNetNSFd(n.netnsFd)}
	}
	return nil
}

// withConn runs fn on the lasting connection, opening it first if needed.
// After an error the connection is closed, so that the next call starts on
// a clean socket.
func (n *Netlink) withConn(fn func(c *nftables.Conn) error) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lasting == nil {
		c, err := NewConn(n.connOptions()...)
		if err != nil {
			return fmt.Errorf("open netlink: %w", err)
		}
		n.lasting = c
	}
	err := fn(n.lasting)
	if err != nil {
		_ = n.lasting.CloseLasting()
		n.lasting = nil
	}
	return err
}

// Close closes the netlink sockets. The Netlink can still be used; the
// next call opens new ones.
func (n *Netlink) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var err error
	if n.lasting != nil {
		err = n.lasting.CloseLasting()
	}
	n.lasting = nil
	if n.batches != nil {
		err = errors.Join(err, n.batches.Close())
		n.batches = nil
	}
	return err
}

func tableFamily(f nftgen.Family) nftables.TableFamily {
	if f == nftgen.FamilyIPv6 {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}

// Sent returns the netlink messages (without batch markers) and their bytes
// on the wire (with them) that Apply has committed since the Netlink was
// made, for measuring.
func (n *Netlink) Sent() (messages, bytes int) { return n.sentMessages, n.sentBytes }

// Apply implements Dataplane. The batch is encoded by nftproxy's own
// encoders (see encode) and sent by sendBatch, without asking the kernel to
// echo every rule.
func (n *Netlink) Apply(ctx context.Context, tx *nftgen.Transaction) error {
	if tx.Empty() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := n.prepare(tx)
	if err != nil {
		return err
	}
	return n.send(p)
}

// ApplyStream implements nftgen.Dataplane: while the kernel commits one
// transaction (inside sendmsg, on this goroutine), the next is encoded on
// another, so that a streamed cold sync costs about the larger of the two
// instead of their sum.
func (n *Netlink) ApplyStream(ctx context.Context, txs iter.Seq[*nftgen.Transaction], after func(ops int) error) error {
	// The free list holds the blocks of the last chunks; a patch needs
	// few.
	defer n.blocks.drop()
	// Unbuffered: one batch is sent while the next is encoded and waits,
	// so no more than two chunks are held at a time.
	ready := make(chan *prepared)
	stop := make(chan struct{})
	var encodeErr error
	go func() {
		defer close(ready)
		for tx := range txs {
			if tx.Empty() {
				continue
			}
			p, err := n.prepare(tx)
			if err != nil {
				encodeErr = err
				return
			}
			select {
			case ready <- p:
			case <-stop:
				return
			}
		}
	}()
	defer func() {
		close(stop)
		for range ready { // let the encoder finish before returning
		}
	}()
	for p := range ready {
		// Stops between two transactions, never inside one.
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := n.send(p); err != nil {
			return err
		}
		if err := after(p.ops); err != nil {
			return err
		}
	}
	// ready is closed: the encoder is done and encodeErr is set or nil.
	return encodeErr
}

// prepared is a transaction encoded as one batch, ready to send. It keeps
// no reference to the transaction, which can go as soon as it is encoded.
type prepared struct {
	family nftgen.Family
	ops    int
	batch  *wireBatch
}

// prepare encodes tx into one batch: a begin, one message per operation
// (or a few, for long element lists) and an end.
func (n *Netlink) prepare(tx *nftgen.Transaction) (*prepared, error) {
	p := &prepared{family: tx.Family, ops: len(tx.Ops), batch: &wireBatch{pool: &n.blocks}}
	addBatchMarker(p.batch, unix.NFNL_MSG_BATCH_BEGIN)
	if err := encode(tx, p.batch); err != nil {
		p.batch.release()
		return nil, err
	}
	addBatchMarker(p.batch, unix.NFNL_MSG_BATCH_END)
	return p, nil
}

// send commits a prepared transaction.
func (n *Netlink) send(p *prepared) error {
	resume := n.quiet()
	err := n.sendBatch(p.batch)
	resume(err == nil)
	msgs, size := p.batch.count-2, p.batch.size
	// The kernel copied the batch: its blocks serve the next.
	p.batch.release()
	if err != nil {
		return fmt.Errorf("commit %d operations to table %s %s: %w", p.ops, p.family, nftgen.TableName, err)
	}
	n.sentMessages += msgs
	n.sentBytes += size
	return nil
}

// encode adds the messages of tx's operations, in order, to batch. Every
// object the batch touches is one of tx's operations: nothing is kept from
// one transaction to the next.
func encode(tx *nftgen.Transaction, batch *wireBatch) error {
	table := &nftables.Table{Name: nftgen.TableName, Family: tableFamily(tx.Family)}
	w := &batchWriter{batch: batch, table: table, family: tx.Family,
		objs: &objEncoder{family: table.Family, table: table.Name, batch: batch}}
	for i := 0; i < len(tx.Ops); {
		j, err := w.write(tx.Ops, i)
		if err != nil {
			return fmt.Errorf("encode op %d (%s): %w", i, tx.Ops[i].Text(tx.Family), err)
		}
		i = j
	}
	return nil
}

// findTable returns the family's nftproxy table on c, or nil and no error
// when it does not exist.
func findTable(c *nftables.Conn, f nftgen.Family) (*nftables.Table, error) {
	return findNamedTable(c, f, nftgen.TableName)
}

// findNamedTable returns the family's table called name on c, or nil and
// no error when it does not exist.
func findNamedTable(c *nftables.Conn, f nftgen.Family, name string) (*nftables.Table, error) {
	table, err := c.ListTableOfFamily(name, tableFamily(f))
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list table %s %s: %w", f, name, err)
	}
	return table, nil
}

// Inventory implements Dataplane. The expected chains (and the layout's
// own) are looked up by name, in windows of requests; the table's use
// count (its chains and sets) tells whether that found everything. Only
// when it did not (chains nftproxy did not expect: Services deleted while
// it was down, or a chain someone else added) is the whole table's chain
// list dumped, which the kernel restarts for every buffer.
// A sharded family's shard tables are inventoried each on its own (small
// enough to be listed) into the result's Shards.
func (n *Netlink) Inventory(ctx context.Context, f nftgen.Family, expected []string) (*nftgen.Inventory, error) {
	inv, err := n.InventoryOf(ctx, f, nftgen.TableName, expected)
	if inv == nil || err != nil {
		return inv, err
	}
	err = n.eachShard(ctx, f, func(name string) error {
		sh, err := n.InventoryOf(ctx, f, name, nil)
		if sh != nil {
			if inv.Shards == nil {
				inv.Shards = map[string]*nftgen.Inventory{}
			}
			inv.Shards[name] = sh
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return inv, nil
}

// InventoryOf is Inventory of the family's table called name: the main
// table or a shard (nftgen.ShardTable).
func (n *Netlink) InventoryOf(ctx context.Context, f nftgen.Family, name string, expected []string) (inv *nftgen.Inventory, err error) {
	roots := layoutChains(f)
	if name != nftgen.TableName {
		roots = shardLayoutChains(f)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var table *nftables.Table
	var sets []*nftables.Set
	var objs []nftables.Obj
	err = n.withConn(func(c *nftables.Conn) error {
		if table, err = findNamedTable(c, f, name); table == nil || err != nil {
			return err
		}
		if sets, err = c.GetSets(table); err != nil {
			return fmt.Errorf("list maps of %s %s: %w", f, name, err)
		}
		// The table's use count counts its named objects too.
		if objs, err = c.GetObjects(table); err != nil {
			return fmt.Errorf("list objects of %s %s: %w", f, name, err)
		}
		return nil
	})
	if table == nil || err != nil {
		return nil, err
	}
	inv = &nftgen.Inventory{}
	for _, s := range sets {
		if !s.Anonymous {
			inv.Sets = append(inv.Sets, s.Name)
		}
	}
	names := append(roots, expected...)
	slices.Sort(names)
	if inv.Chains, err = n.existingChains(table, slices.Compact(names)); err != nil {
		return nil, fmt.Errorf("look up chains of %s %s: %w", f, name, err)
	}
	if uint32(len(inv.Chains)+len(sets)+len(objs)) == table.Use || !n.listable(len(inv.Chains)) {
		// Every object named, or a table too large to list (see
		// listingMaxChains): what nothing names stays unnamed.
		return inv, nil
	}
	chains, err := n.tableChains(table)
	if err != nil {
		return nil, fmt.Errorf("list chains of %s %s: %w", f, name, err)
	}
	inv.Chains = inv.Chains[:0]
	for _, ch := range chains {
		inv.Chains = append(inv.Chains, ch.Name)
	}
	return inv, nil
}

// DeleteTable implements Dataplane: the main table and every shard table,
// in one transaction.
func (n *Netlink) DeleteTable(ctx context.Context, f nftgen.Family) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	shards, err := n.ShardTables(ctx, f)
	if err != nil {
		return err
	}
	if len(shards) == 0 {
		return n.deleteTable(ctx, f, nftgen.TableName)
	}
	return n.withConn(func(c *nftables.Conn) error {
		for _, name := range shards {
			c.DelTable(&nftables.Table{Name: name, Family: tableFamily(f)})
		}
		if t, err := findTable(c, f); err != nil {
			return err
		} else if t != nil {
			c.DelTable(t)
		}
		if err := c.Flush(); err != nil {
			return fmt.Errorf("delete the %s tables: %w", f, err)
		}
		return nil
	})
}

// eachShard calls fn with the name of each of the family's shard tables,
// in order, and stops at its first error.
func (n *Netlink) eachShard(ctx context.Context, f nftgen.Family, fn func(name string) error) error {
	names, err := n.ShardTables(ctx, f)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := fn(name); err != nil {
			return err
		}
	}
	return nil
}

// ShardTables returns the names of the family's shard tables.
func (n *Netlink) ShardTables(ctx context.Context, f nftgen.Family) (names []string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	err = n.withConn(func(c *nftables.Conn) error {
		names, err = shardTables(c, f)
		return err
	})
	return names, err
}

// deleteTable deletes the family's table of that name; a missing one is
// not an error.
func (n *Netlink) deleteTable(ctx context.Context, f nftgen.Family, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return n.withConn(func(c *nftables.Conn) error {
		c.DelTable(&nftables.Table{Name: name, Family: tableFamily(f)})
		if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete table %s %s: %w", f, name, err)
		}
		return nil
	})
}

// Counters returns the packets counted so far by each named counter of
// family f's table, in one request.
func (n *Netlink) Counters(ctx context.Context, f nftgen.Family) (map[string]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	err := n.withConn(func(c *nftables.Conn) error {
		shards, err := shardTables(c, f)
		if err != nil {
			return err
		}
		// A shard's KUBE-NODEPORTS counts in a counter of its own: the
		// family's count is the sum.
		for _, name := range append([]string{nftgen.TableName}, shards...) {
			objs, err := c.GetObjects(&nftables.Table{Name: name, Family: tableFamily(f)})
			if err != nil {
				return fmt.Errorf("list the objects of table %s %s: %w", f, name, err)
			}
			for _, o := range objs {
				if counter, ok := o.(*nftables.CounterObj); ok {
					out[counter.Name] += counter.Packets
				}
			}
		}
		return nil
	})
	return out, err
}
