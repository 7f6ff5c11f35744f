package explain

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/nftgen"
)

// Vantage is where the packet starts.
type Vantage string

// The vantage points of a packet.
const (
	// FromPod is a pod on this node: the packet arrives on the pod's
	// interface (prerouting, then forward or input, then postrouting).
	FromPod Vantage = "pod"
	// FromNode is the node itself: the packet is sent locally (output,
	// then postrouting).
	FromNode Vantage = "node"
	// FromExternal is another host: the packet arrives on one of the
	// node's interfaces (the same hooks as a pod's).
	FromExternal Vantage = "external"
)

// ParseVantage parses "pod", "node" or "external".
func ParseVantage(s string) (Vantage, error) {
	switch v := Vantage(s); v {
	case FromPod, FromNode, FromExternal:
		return v, nil
	}
	return "", fmt.Errorf("unknown vantage %q (want pod, node or external)", s)
}

// Query is the first packet of a new connection.
type Query struct {
	From Vantage
	// Proto is the IP protocol number (6 TCP, 17 UDP, 132 SCTP).
	Proto uint8
	Src   netip.Addr
	Dst   netip.AddrPort
	// All walks every target of a random pick and every affinity
	// assumption. Without it, a pick among more than SummaryLimit
	// endpoints is walked for the first SummaryLimit and the others are
	// summed up in one path (verdict More), and at most SummaryLimit
	// affinity assumptions are walked: the walk's time and memory then
	// stay linear in the endpoints, and its answer small.
	All bool
}

// SummaryLimit is how many targets of a random pick, and how many
// affinity assumptions, a walk without Query.All follows.
const SummaryLimit = 16

// Family is the table family the query's destination belongs to.
func (q Query) Family() nftgen.Family {
	if q.Dst.Addr().Unmap().Is4() {
		return nftgen.FamilyIPv4
	}
	return nftgen.FamilyIPv6
}

// Host is what the walk needs to know about the node.
type Host interface {
	// IsLocal reports whether addr is one of the node's own addresses
	// (what "fib daddr type local" tests).
	IsLocal(addr netip.Addr) bool
}

// LocalAddrs is a Host whose addresses are the listed ones plus the
// loopback range.
type LocalAddrs []netip.Addr

// IsLocal reports whether addr is loopback or listed.
func (l LocalAddrs) IsLocal(addr netip.Addr) bool {
	addr = addr.Unmap()
	return addr.IsLoopback() || slices.Contains(l, addr)
}

// Step is one rule that matched, in the order the kernel evaluates them.
type Step struct {
	Hook  nftgen.Hook `json:"hook"`
	Chain string      `json:"chain"`
	// Rule is the rule's position in its chain, from 1.
	Rule int `json:"rule"`
	// Handle is the kernel's handle of the rule (0 offline).
	Handle uint64 `json:"handle,omitempty"`
	// NFT is the rule as nft prints it.
	NFT string `json:"nft"`
	// Element is the map element or random target the rule chose.
	Element string `json:"element,omitempty"`
	// Did is what the rule did: a verdict, "dnat to …", "masquerade",
	// "set mark …" or "continue".
	Did string `json:"did"`
	// Chance is the probability of the random choice this step took
	// ("1/3"), or the affinity entry it assumed.
	Chance string `json:"chance,omitempty"`
	// Iptables are the compat view's rules for this step, as
	// iptables-save prints them with their table.
	Iptables []string `json:"iptables,omitempty"`
}

// Verdicts of a path.
const (
	// Accepted: the packet passes every chain (DNATed or not).
	Accepted = "accept"
	// Dropped: a rule drops it; the client times out.
	Dropped = "drop"
	// Rejected: a rule rejects it; the client is refused.
	Rejected = "reject"
	// Unknown: the walk met something it cannot evaluate.
	Unknown = "unknown"
	// More: the other targets of a random pick, not walked (Query.All
	// walks them); Path.More says how many.
	More = "more"
)

// Path is one way through the table, with its probability.
type Path struct {
	// Probability of this path for a first connection; for a path that
	// assumes an affinity entry, the probability given that entry.
	Probability float64 `json:"probability"`
	// Affinity is the affinity set this path assumes holds the client
	// (an earlier connection chose that endpoint); empty for a first
	// connection.
	Affinity string `json:"affinity,omitempty"`
	// AffinityLeft is set when the table was read from the kernel and the
	// client has an entry in Affinity: the time that entry has left. The
	// walk then does not branch: this is the one path.
	AffinityLeft string `json:"affinityLeft,omitempty"`
	Steps        []Step `json:"steps"`
	Verdict      string `json:"verdict"`
	// Cause explains a drop, a reject or an unknown verdict: the comment
	// of the rule or map element that decided, or what the walk met.
	Cause string `json:"cause,omitempty"`
	// Endpoint is the DNAT destination ("10.244.0.5:8080") and
	// EndpointChain the KUBE-SEP- chain that set it.
	Endpoint      string `json:"endpoint,omitempty"`
	EndpointChain string `json:"endpointChain,omitempty"`
	// Masquerade says whether the source is rewritten on the way out,
	// and MasqueradeReason which rule set the mark, and why.
	Masquerade       bool   `json:"masquerade"`
	MasqueradeReason string `json:"masqueradeReason,omitempty"`
	// Delivered is "local" when the packet ends on the node itself,
	// "forward" when the node routes it on.
	Delivered string `json:"delivered,omitempty"`
	// More is, for the verdict More, how many targets of the pick this
	// path stands for (each with the pick's chance).
	More int `json:"more,omitempty"`
}

// Explanation is the answer to a Query.
type Explanation struct {
	Family   nftgen.Family `json:"family"`
	From     Vantage       `json:"from"`
	Protocol string        `json:"protocol"`
	Src      string        `json:"src"`
	Dst      string        `json:"dst"`
	// NoTable is true when the family has no nftproxy table: nothing
	// rewrites the packet.
	NoTable bool   `json:"noTable,omitempty"`
	Paths   []Path `json:"paths"`
	// AffinityNotWalked counts the affinity assumptions (paths "if the
	// client is in @affinity-…") left out without Query.All.
	AffinityNotWalked int `json:"affinityNotWalked,omitempty"`
}

// Endpoints returns the distinct DNAT destinations of the accepted paths
// of a first connection (no affinity entry), sorted.
func (e *Explanation) Endpoints() []string {
	var out []string
	for _, p := range e.Paths {
		if p.Verdict == Accepted && p.Endpoint != "" && p.Affinity == "" && !slices.Contains(out, p.Endpoint) {
			out = append(out, p.Endpoint)
		}
	}
	slices.Sort(out)
	return out
}

// Explain walks q through st, the family's table as the kernel holds it
// (nil: no table).
func Explain(st *nftgen.TableState, q Query, host Host) *Explanation {
	e, _ := ExplainContext(context.Background(), st, q, host)
	return e
}

// ExplainContext is Explain that stops, with ctx's error, once ctx ends
// (a client that went away).
func ExplainContext(ctx context.Context, st *nftgen.TableState, q Query, host Host) (*Explanation, error) {
	q.Src, q.Dst = q.Src.Unmap(), netip.AddrPortFrom(q.Dst.Addr().Unmap(), q.Dst.Port())
	e := &Explanation{Family: q.Family(), From: q.From, Protocol: nftgen.ProtoName(q.Proto), Src: q.Src.String(), Dst: q.Dst.String()}
	if st == nil {
		e.NoTable = true
		st = &nftgen.TableState{Family: e.Family}
	}
	w := &walker{ctx: ctx, all: q.All, st: st, host: host, origins: compat.Origins(st), family: e.Family, texts: map[*nftgen.Rule]string{}}
	start := &state{src: q.Src, dst: q.Dst.Addr(), dport: q.Dst.Port(), proto: q.Proto, prob: 1}
	e.Paths = w.walk(start, q.From)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("explain %s: %w", q.Dst, err)
	}
	e.AffinityNotWalked = w.affinityNotWalked
	return e, nil
}
