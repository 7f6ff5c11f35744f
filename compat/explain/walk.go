package explain

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/nftproxy/nftproxy/compat"
	"github.com/nftproxy/nftproxy/nftgen"
)

// maxDepth bounds jumps, as the kernel's jump stack does (16 levels); a
// deeper walk is reported as unknown instead of looping.
const maxDepth = 16

// state is the packet, and what happened to it so far, on one path.
type state struct {
	src, dst netip.Addr
	dport    uint16
	proto    uint8
	mark     uint32
	// natted is conntrack's "dnat" status: a DNAT happened.
	natted bool
	prob   float64
	// affinity is the affinity set this path assumes (or, read from the
	// kernel, knows) holds the client; affinityLeft is the time the
	// kernel's entry has left, when known.
	affinity, affinityLeft string
	steps                  []Step
	// callers are the steps that jumped into the chains being walked,
	// innermost last.
	callers []Step
	hook    nftgen.Hook

	endpoint, endpointChain string
	masquerade              bool
	masqReason              string
	markReason              string
	cause                   string
	// lastComment is the comment of the last step (its map element's,
	// else its rule's).
	lastComment string
	// more is how many targets of a pick a More path stands for.
	more int
}

func (s *state) clone() *state {
	c := *s
	c.steps = slices.Clip(s.steps)
	c.callers = slices.Clip(s.callers)
	return &c
}

// result is how a walk through one chain ended: "return" (the chain ran
// out or returned) or a verdict.
type result struct {
	s       *state
	verdict string
}

type walker struct {
	ctx     context.Context
	all     bool
	st      *nftgen.TableState
	host    Host
	origins map[compat.Origin][]compat.Line
	family  nftgen.Family
	// texts holds each rule's text, made once: a pick's rule is a step of
	// every path through it.
	texts map[*nftgen.Rule]string
	// affinityWalked and affinityNotWalked count the affinity
	// assumptions followed and left out (see Query.All).
	affinityWalked, affinityNotWalked int
}

// maxRuleText bounds the text of one step's rule: a pick among thousands
// of endpoints is one rule of hundreds of kilobytes, which `nft list`
// shows whole.
const maxRuleText = 1000

// ruleText is r's text, cut to maxRuleText.
func (w *walker) ruleText(r *nftgen.Rule) string {
	if t, ok := w.texts[r]; ok {
		return t
	}
	t := r.Text(w.family)
	if len(t) > maxRuleText {
		t = fmt.Sprintf("%s… (%d characters; nft list shows it whole)", t[:maxRuleText], len(t))
	}
	w.texts[r] = t
	return t
}

// walk runs the packet through the hooks of its vantage point.
func (w *walker) walk(s *state, from Vantage) []Path {
	var hooks []nftgen.Hook
	if from == FromNode {
		hooks = []nftgen.Hook{nftgen.HookOutput, nftgen.HookPostrouting}
	} else {
		hooks = []nftgen.Hook{nftgen.HookPrerouting, ""}
	}
	var paths []Path
	live := []*state{s}
	for _, h := range hooks {
		var next []*state
		for _, s := range live {
			hs := []nftgen.Hook{h}
			if h == "" {
				// Routing after prerouting: to the node, or on.
				hs = []nftgen.Hook{nftgen.HookForward, nftgen.HookPostrouting}
				if w.host.IsLocal(s.dst) {
					hs = []nftgen.Hook{nftgen.HookInput}
				}
			}
			for _, res := range w.hooks(s, hs, true) {
				if res.verdict != Accepted {
					paths = append(paths, w.path(res))
					continue
				}
				next = append(next, res.s)
			}
		}
		live = next
	}
	for _, s := range live {
		delivered := "forward"
		if w.host.IsLocal(s.dst) {
			delivered = "local"
			if from == FromNode {
				// Sent to a local address: the packet comes back in
				// through loopback; NAT is already decided.
				res := w.hooks(s, []nftgen.Hook{nftgen.HookInput}, false)
				for _, r := range res {
					if r.verdict != Accepted {
						paths = append(paths, w.path(r))
						continue
					}
					p := w.path(r)
					p.Delivered = delivered
					paths = append(paths, p)
				}
				continue
			}
		}
		p := w.path(result{s, Accepted})
		p.Delivered = delivered
		paths = append(paths, p)
	}
	sort.SliceStable(paths, func(i, j int) bool {
		if (paths[i].Affinity == "") != (paths[j].Affinity == "") {
			return paths[i].Affinity == ""
		}
		return false
	})
	return paths
}

// hooks runs s through every base chain of the hooks, in priority order.
// withNAT false skips NAT chains (the connection's NAT is decided).
func (w *walker) hooks(s *state, hooks []nftgen.Hook, withNAT bool) []result {
	live := []result{{s, Accepted}}
	for _, h := range hooks {
		for _, c := range w.baseChains(h) {
			if !withNAT && c.Base.Type == nftgen.NATType {
				continue
			}
			var next []result
			for _, r := range live {
				if r.verdict != Accepted {
					next = append(next, r)
					continue
				}
				r.s.hook = h
				for _, out := range w.chain(r.s, c, 0, 0) {
					if out.verdict == "return" {
						// The chain's policy: accept.
						out.verdict = Accepted
					}
					next = append(next, out)
				}
			}
			live = next
		}
	}
	return live
}

func (w *walker) baseChains(h nftgen.Hook) []*nftgen.Chain {
	var out []*nftgen.Chain
	for _, c := range w.st.Chains {
		if c.Base != nil && c.Base.Hook == h {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Base.Priority < out[j].Base.Priority })
	return out
}

// chain walks c from rule i; nothing once the walk's context ended.
func (w *walker) chain(s *state, c *nftgen.Chain, i, depth int) []result {
	if w.ctx.Err() != nil {
		return nil
	}
	if i >= len(c.Rules) {
		return []result{{s, "return"}}
	}
	var out []result
	for _, b := range w.rule(s, c, i) {
		switch {
		case !b.matched:
			out = append(out, w.chain(b.s, c, i+1, depth)...)
		case b.terminal != "":
			out = append(out, result{b.s, b.terminal})
		case b.verdict == nil:
			out = append(out, w.chain(b.s, c, i+1, depth)...)
		default:
			out = append(out, w.verdict(b.s, c, i, depth, *b.verdict)...)
		}
	}
	return out
}

func (w *walker) verdict(s *state, c *nftgen.Chain, i, depth int, v nftgen.Verdict) []result {
	switch v.Kind {
	case nftgen.VerdictAccept:
		return []result{{s, Accepted}}
	case nftgen.VerdictDrop:
		return []result{{s, Dropped}}
	case nftgen.VerdictReturn:
		return []result{{s, "return"}}
	}
	target := w.st.Chain(v.Chain)
	if target == nil || target.Base != nil {
		s.cause = fmt.Sprintf("rule %d of %s: %s %s, a chain the table does not have", i+1, c.Name, v.Kind, v.Chain)
		return []result{{s, Unknown}}
	}
	if depth+1 > maxDepth {
		s.cause = fmt.Sprintf("rule %d of %s: more than %d nested jumps", i+1, c.Name, maxDepth)
		return []result{{s, Unknown}}
	}
	if v.Kind == nftgen.VerdictGoto {
		// A goto replaces the chain: its return goes to our caller.
		return w.chain(s, target, 0, depth+1)
	}
	s.callers = append(s.callers, s.steps[len(s.steps)-1])
	var out []result
	for _, r := range w.chain(s, target, 0, depth+1) {
		if r.verdict != "return" {
			out = append(out, r)
			continue
		}
		r.s.callers = r.s.callers[:len(r.s.callers)-1]
		out = append(out, w.chain(r.s, c, i+1, depth)...)
	}
	return out
}

// path turns a finished walk into a Path.
func (w *walker) path(r result) Path {
	s := r.s
	p := Path{Probability: s.prob, Affinity: s.affinity, AffinityLeft: s.affinityLeft, Steps: s.steps, Verdict: r.verdict, Cause: s.cause,
		Endpoint: s.endpoint, EndpointChain: s.endpointChain, Masquerade: s.masquerade, MasqueradeReason: s.masqReason, More: s.more}
	if p.Steps == nil {
		p.Steps = []Step{}
	}
	return p
}

// step records rule i of c as taken.
func (w *walker) step(s *state, c *nftgen.Chain, i int, element, did, chance string) {
	r := &c.Rules[i]
	st := Step{Hook: s.hook, Chain: c.Name, Rule: i + 1, Handle: r.Handle, NFT: w.ruleText(r), Element: element, Did: did, Chance: chance}
	lines := w.origins[compat.Origin{Chain: c.Name, Rule: i, Element: element}]
	if len(lines) == 0 && element != "" {
		lines = w.origins[compat.Origin{Chain: c.Name, Rule: i}]
	}
	for _, l := range lines {
		st.Iptables = append(st.Iptables, l.String())
	}
	s.steps = append(s.steps, st)
}

// masqueradeReason says why the rule that jumped to the mark chain marks
// the packet for masquerade, in kube-proxy's terms.
func masqueradeReason(caller *Step, r *nftgen.Rule) string {
	why := "marked by " + caller.Chain
	switch {
	case strings.HasPrefix(caller.Chain, nftgen.PrefixEndpoint):
		why = "hairpin: the endpoint connects to its own Service"
	case strings.HasPrefix(caller.Chain, nftgen.PrefixService), strings.HasPrefix(caller.Chain, nftgen.PrefixLocal):
		why = "masquerade-all: every packet to the cluster IP is masqueraded"
		for _, st := range r.Stmts {
			if a, ok := st.(nftgen.MatchAddr); ok && a.Dir == nftgen.Saddr && a.Negate {
				why = fmt.Sprintf("the source is outside the cluster CIDR %s", a.Prefix)
			}
		}
	case strings.HasPrefix(caller.Chain, nftgen.PrefixExternal):
		why = "an external destination (node port, external IP or load balancer IP)"
		for _, st := range r.Stmts {
			if f, ok := st.(nftgen.MatchFibLocal); ok && f.Dir == nftgen.Saddr {
				why = "a local source to a Service with externalTrafficPolicy Local"
			}
		}
	}
	if r.Comment != "" {
		why += fmt.Sprintf(" (%s rule %d: %q)", caller.Chain, caller.Rule, r.Comment)
	} else {
		why += fmt.Sprintf(" (%s rule %d)", caller.Chain, caller.Rule)
	}
	return why
}
