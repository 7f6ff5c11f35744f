//go:build linux

package forward

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/nftgen/kernel"
)

// EnsureNFT writes kube-proxy's KUBE-FORWARD chain and its jump into the
// iptables-nft filter table of each family whose FORWARD chain can drop
// (see needed), in one transaction per family, in the current network
// namespace. A table without a FORWARD chain is left alone: nothing of
// iptables-nft filters forwarded traffic there. hf is the generator's
// (nftgen.NewHostForward).
func EnsureNFT(hf nftgen.HostForward) (Result, error) {
	rules, err := rulesOf(hf)
	if err != nil {
		return Result{}, err
	}
	c, err := kernel.NewConn()
	if err != nil {
		return Result{}, err
	}
	defer c.CloseLasting()
	var res Result
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		wrote, err := ensureNFTFamily(c, fam, rules)
		if err != nil {
			return res, fmt.Errorf("iptables-nft %s filter: %w", familyName(fam), err)
		}
		if wrote {
			res.Written = append(res.Written, "nft "+familyName(fam))
		}
	}
	return res, nil
}

func familyName(fam nftables.TableFamily) string {
	if fam == nftables.TableFamilyIPv6 {
		return "ip6"
	}
	return "ip"
}

func ensureNFTFamily(c *nftables.Conn, fam nftables.TableFamily, rules forwardRules) (bool, error) {
	f, err := readNFTForward(c, fam)
	if err != nil || f == nil {
		return false, err
	}
	policyDrop := f.fwd.Policy != nil && *f.fwd.Policy == nftables.ChainPolicyDrop
	if !needed(policyDrop, f.drops) {
		return false, nil
	}
	if f.ours != nil && f.jumps == 1 && jumpsTo(f.rules[0], Chain) {
		if current, err := c.GetRules(f.t, f.ours); err == nil && inPlace(current, rules.accepts) {
			return false, nil
		}
	}
	if err := f.write(c, rules); err != nil {
		return false, err
	}
	return true, nil
}

// nftForward is what ensureNFTFamily reads of iptables-nft's filter
// table: FORWARD, its rules (jumps of them to KUBE-FORWARD, drops those
// that drop or reject) and KUBE-FORWARD if it exists.
type nftForward struct {
	t            *nftables.Table
	fwd, ours    *nftables.Chain
	rules        []*nftables.Rule
	jumps, drops int
}

// readNFTForward reads the family's FORWARD and KUBE-FORWARD chains by
// name, not a listing of every chain of the family (nftproxy's own table
// holds hundreds of thousands at scale); nil when the family has no
// FORWARD base chain.
func readNFTForward(c *nftables.Conn, fam nftables.TableFamily) (*nftForward, error) {
	f := &nftForward{t: &nftables.Table{Name: "filter", Family: fam}}
	fwd, err := c.ListChain(f.t, "FORWARD")
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up FORWARD: %w", err)
	}
	if fwd.Hooknum == nil || *fwd.Hooknum != *nftables.ChainHookForward {
		return nil, nil
	}
	fwd.Table, f.fwd = f.t, fwd
	ours, err := c.ListChain(f.t, Chain)
	switch {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return nil, fmt.Errorf("look up %s: %w", Chain, err)
	default:
		ours.Table, f.ours = f.t, ours
	}
	if f.rules, err = c.GetRules(f.t, fwd); err != nil {
		return nil, fmt.Errorf("list FORWARD: %w", err)
	}
	for _, r := range f.rules {
		switch {
		case jumpsTo(r, Chain):
			f.jumps++
		case dropsOrRejects(r):
			f.drops++
		}
	}
	return f, nil
}

// write (re)writes KUBE-FORWARD's accept rules and makes FORWARD's first
// rule the one jump to it, in one transaction.
func (f *nftForward) write(c *nftables.Conn, rules forwardRules) error {
	ours := f.ours
	if ours == nil {
		ours = c.AddChain(&nftables.Chain{Name: Chain, Table: f.t})
	} else {
		c.FlushChain(ours)
	}
	for _, r := range rules.accepts {
		accept, err := nftRule(f.t, ours, r.comment, nftMatch(r), &expr.Verdict{Kind: expr.VerdictAccept})
		if err != nil {
			return err
		}
		c.AddRule(accept)
	}
	if f.jumps == 0 || !jumpsTo(f.rules[0], Chain) {
		for _, r := range f.rules {
			if jumpsTo(r, Chain) {
				if err := c.DelRule(r); err != nil {
					return err
				}
			}
		}
		jump, err := nftRule(f.t, f.fwd, rules.jumpComment, nil, &expr.Verdict{Kind: expr.VerdictJump, Chain: Chain})
		if err != nil {
			return err
		}
		c.InsertRule(jump) // at the head, as kube-proxy prepends it
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", Chain, err)
	}
	return nil
}

// nftMatch is a rule's match as iptables-nft writes it: -m mark as native
// expressions (mark & bits == bits), -m conntrack as the xt match.
func nftMatch(r rule) []expr.Any {
	if r.mark != 0 {
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(r.mark), Xor: native32(0)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: native32(r.mark)},
		}
	}
	return []expr.Any{&expr.Match{Name: "conntrack", Rev: 3, Info: ptr(xt.Unknown(conntrackInfo(r.ctState)))}}
}

// nftRule is one iptables-nft rule as iptables-nft writes kube-proxy's:
// the comment match, the matches, a counter and the verdict.
func nftRule(t *nftables.Table, ch *nftables.Chain, comment string, matches []expr.Any, v *expr.Verdict) (*nftables.Rule, error) {
	info, err := commentInfo(comment)
	if err != nil {
		return nil, err
	}
	exprs := append(append([]expr.Any{&expr.Match{Name: "comment", Rev: 0, Info: ptr(xt.Unknown(info))}}, matches...),
		&expr.Counter{}, v)
	return &nftables.Rule{Table: t, Chain: ch, Exprs: exprs}, nil
}

// inPlace reports whether KUBE-FORWARD's rules are the ones EnsureNFT
// writes: each with its comment and its mark (or a conntrack match).
func inPlace(current []*nftables.Rule, want []rule) bool {
	if len(current) != len(want) {
		return false
	}
	for i, r := range current {
		matches := func(e expr.Any) bool {
			if want[i].mark != 0 {
				c, ok := e.(*expr.Cmp)
				return ok && bytes.Equal(c.Data, native32(want[i].mark))
			}
			m, ok := e.(*expr.Match)
			return ok && m.Name == "conntrack"
		}
		info, _ := commentInfo(want[i].comment)
		hasComment, hasMatch := false, false
		for _, e := range r.Exprs {
			if m, ok := e.(*expr.Match); ok && m.Name == "comment" {
				if u, ok := m.Info.(*xt.Unknown); ok && bytes.Equal(*u, info) {
					hasComment = true
				}
				if c, ok := m.Info.(*xt.Comment); ok && string(*c) == want[i].comment {
					hasComment = true
				}
			}
			hasMatch = hasMatch || matches(e)
		}
		if !hasComment || !hasMatch {
			return false
		}
	}
	return true
}

// dropsOrRejects reports whether r ends in a drop or a reject (nft's, or
// iptables-nft's REJECT target).
func dropsOrRejects(r *nftables.Rule) bool {
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Verdict:
			if e.Kind == expr.VerdictDrop {
				return true
			}
		case *expr.Reject:
			return true
		case *expr.Target:
			if e.Name == "REJECT" {
				return true
			}
		}
	}
	return false
}

// jumpsTo reports whether r ends in a jump or goto to chain.
func jumpsTo(r *nftables.Rule, chain string) bool {
	for _, e := range r.Exprs {
		if v, ok := e.(*expr.Verdict); ok && (v.Kind == expr.VerdictJump || v.Kind == expr.VerdictGoto) && v.Chain == chain {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

func native32(v uint32) []byte {
	b := make([]byte, 4)
	putU32(b, v)
	return b
}
