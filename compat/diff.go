package compat

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/nftproxy/nftproxy/nftgen"
)

// Save is a parsed iptables-save text: per table, the chains and their
// rules (without "-A CHAIN" and counters).
type Save map[string]*SavedTable

// SavedTable is one table of a Save.
type SavedTable struct {
	Chains map[string]bool
	Rules  map[string][]string
}

// Parse reads iptables-save output (with or without -c counters).
func Parse(r io.Reader) (Save, error) {
	s := Save{}
	var cur *SavedTable
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "" || strings.HasPrefix(text, "#"):
		case strings.HasPrefix(text, "*"):
			cur = &SavedTable{Chains: map[string]bool{}, Rules: map[string][]string{}}
			s[text[1:]] = cur
		case text == "COMMIT":
			cur = nil
		case cur == nil:
			return nil, fmt.Errorf("line %d: %q outside a table", line, text)
		case strings.HasPrefix(text, ":"):
			f := strings.Fields(text[1:])
			if len(f) == 0 {
				return nil, fmt.Errorf("line %d: empty chain line", line)
			}
			cur.Chains[f[0]] = true
		default:
			if strings.HasPrefix(text, "[") {
				if i := strings.Index(text, "]"); i > 0 {
					text = strings.TrimSpace(text[i+1:])
				}
			}
			f := strings.SplitN(text, " ", 3)
			if len(f) < 2 || f[0] != "-A" {
				return nil, fmt.Errorf("line %d: not a rule: %q", line, text)
			}
			rest := ""
			if len(f) == 3 {
				rest = f[2]
			}
			cur.Rules[f[1]] = append(cur.Rules[f[1]], strings.Join(strings.Fields(rest), " "))
		}
	}
	return s, sc.Err()
}

// FromTables converts rendered tables into a Save.
func FromTables(tables []*Table) Save {
	s := Save{}
	for _, t := range tables {
		st := &SavedTable{Chains: map[string]bool{}, Rules: map[string][]string{}}
		for _, c := range t.Chains {
			st.Chains[c] = true
		}
		for c, rules := range t.Rules {
			for _, r := range rules {
				st.Rules[c] = append(st.Rules[c], strings.Join(strings.Fields(r), " "))
			}
		}
		s[t.Name] = st
	}
	return s
}

// Diff looks at kube-proxy's chains (nftgen.IsKubeProxyChain) and at the
// jumps into them from the built-in chains.
var (
	// unordered chains are those whose rule order kube-proxy leaves to a
	// Go map iteration.
	unordered = []string{"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL"}
	builtin   = []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
)

// DiffOptions tune the comparison.
type DiffOptions struct {
	// IgnoreNfacct removes "-m nfacct" matches, and the localhost NodePort
	// rules that exist only to feed an nfacct counter, from both sides.
	IgnoreNfacct bool
}

// Difference is one rule or chain that differs.
type Difference struct {
	// Kind is "missing" (in legacy only), "extra" (in current only),
	// "changed", "order" or KindExplained.
	Kind string
	// Note says why an explained difference is not drift.
	Note    string
	Table   string
	Chain   string
	Service string
	// Legacy and Current are the rules (empty where there is none).
	Legacy, Current string
}

var (
	nfacctRe = regexp.MustCompile(` -m nfacct --nfacct-name +\S+`)
	jumpRe   = regexp.MustCompile(`-j (\S+)`)
)

func normalize(rules []string, opts DiffOptions, chain string) []string {
	var out []string
	for _, r := range rules {
		if opts.IgnoreNfacct && strings.Contains(r, "-m nfacct") {
			if chain == "KUBE-NODEPORTS" && strings.Contains(r, "-d 127.0.0.0/8") {
				continue
			}
			r = nfacctRe.ReplaceAllString(r, "")
		}
		out = append(out, r)
	}
	return out
}

// relevant returns the rules of a chain that diff compares: all rules of a
// kube-proxy chain, and the jumps into kube-proxy chains from built-ins.
func relevant(t *SavedTable, chain string, opts DiffOptions) []string {
	rules := normalize(t.Rules[chain], opts, chain)
	if nftgen.IsKubeProxyChain(chain) {
		return rules
	}
	var out []string
	for _, r := range rules {
		if m := jumpRe.FindStringSubmatch(r); m != nil && nftgen.IsKubeProxyChain(m[1]) {
			out = append(out, r)
		}
	}
	return out
}

// Diff compares a legacy iptables-save with the current one, rule for rule,
// on kube-proxy's chains only.
func Diff(legacy, current Save, opts DiffOptions) []Difference {
	var diffs []Difference
	for _, table := range []string{"nat", "filter", "mangle"} {
		lt, ct := legacy[table], current[table]
		if lt == nil {
			continue // legacy did not save this table
		}
		if ct == nil {
			ct = &SavedTable{Chains: map[string]bool{}, Rules: map[string][]string{}}
		}
		chains := map[string]bool{}
		for _, t := range []*SavedTable{lt, ct} {
			for c := range t.Chains {
				chains[c] = true
			}
			for c := range t.Rules {
				chains[c] = true
			}
		}
		for c := range chains {
			if !nftgen.IsKubeProxyChain(c) && !slices.Contains(builtin, c) {
				delete(chains, c)
			}
		}
		svcOf := serviceIndex(lt, ct)
		for _, c := range slices.Sorted(maps.Keys(chains)) {
			if nftgen.IsKubeProxyChain(c) && lt.Chains[c] != ct.Chains[c] {
				kind := "missing"
				if ct.Chains[c] {
					kind = "extra"
				}
				diffs = append(diffs, Difference{Kind: kind, Table: table, Chain: c, Service: svcOf(c, ""),
					Legacy: chainLine(lt, c), Current: chainLine(ct, c)})
			}
			diffs = append(diffs, diffChain(table, c, relevant(lt, c, opts), relevant(ct, c, opts), svcOf)...)
		}
	}
	explainFailClosed(diffs, current)
	return diffs
}

func chainLine(t *SavedTable, c string) string {
	if t.Chains[c] {
		return ":" + c
	}
	return ""
}

const nodePortsJump = "KUBE-NODEPORTS"

func diffChain(table, chain string, legacy, current []string, svcOf func(chain, rule string) string) []Difference {
	var diffs []Difference
	if slices.Equal(legacy, current) {
		return nil
	}
	// Multiset difference.
	count := map[string]int{}
	for _, r := range legacy {
		count[r]++
	}
	for _, r := range current {
		count[r]--
	}
	var missing, extra []string
	for _, r := range legacy {
		if count[r] > 0 {
			missing = append(missing, r)
			count[r]--
		}
	}
	for r, n := range count {
		for ; n < 0; n++ {
			extra = append(extra, r)
		}
	}
	sort.Strings(extra)
	if slices.Contains(unordered, chain) {
		var explained []string
		missing, explained = shadowed(missing, current)
		for _, r := range explained {
			diffs = append(diffs, Difference{Kind: KindExplained, Note: shadowedNote, Table: table, Chain: chain, Service: svcOf(chain, r), Legacy: r})
		}
	}
	// Pair a missing and an extra rule that share a comment: "changed".
	for i := 0; i < len(missing); i++ {
		key := commentOf(missing[i])
		if key == "" {
			continue
		}
		for j, e := range extra {
			if commentOf(e) == key {
				diffs = append(diffs, Difference{Kind: "changed", Table: table, Chain: chain, Service: svcOf(chain, e), Legacy: missing[i], Current: e})
				missing = slices.Delete(missing, i, i+1)
				extra = slices.Delete(extra, j, j+1)
				i--
				break
			}
		}
	}
	for _, r := range missing {
		diffs = append(diffs, Difference{Kind: "missing", Table: table, Chain: chain, Service: svcOf(chain, r), Legacy: r})
	}
	for _, r := range extra {
		diffs = append(diffs, Difference{Kind: "extra", Table: table, Chain: chain, Service: svcOf(chain, r), Current: r})
	}
	if len(diffs) > 0 {
		return diffs
	}
	// Same rules, different order.
	if slices.Contains(unordered, chain) {
		if chain == "KUBE-SERVICES" && table == "nat" {
			lastL, lastC := legacy[len(legacy)-1], current[len(current)-1]
			if strings.Contains(lastL, "-j "+nodePortsJump) != strings.Contains(lastC, "-j "+nodePortsJump) {
				return []Difference{{Kind: "order", Table: table, Chain: chain, Service: "(node-wide)", Legacy: lastL, Current: lastC}}
			}
		}
		return nil
	}
	if table == "filter" && (chain == "INPUT" || chain == "OUTPUT") && slices.Equal(withoutFirewallJump(legacy), withoutFirewallJump(current)) {
		return []Difference{{Kind: KindExplained, Note: firewallJumpNote, Table: table, Chain: chain, Service: "(node-wide)",
			Legacy: strings.Join(legacy, "\n"), Current: strings.Join(current, "\n")}}
	}
	return []Difference{{Kind: "order", Table: table, Chain: chain, Service: svcOf(chain, ""), Legacy: strings.Join(legacy, "\n"), Current: strings.Join(current, "\n")}}
}

// firewallJump is the jump into KUBE-FIREWALL that kubelet and kube-proxy
// both prepend to filter INPUT and OUTPUT.
const firewallJump = "-j KUBE-FIREWALL"

// firewallJumpNote explains a KUBE-FIREWALL jump in another place.
const firewallJumpNote = "the jump to KUBE-FIREWALL is kubelet's as well as kube-proxy's: each prepends it once, so its place " +
	"among kube-proxy's jumps depends on which started first (on a node, kubelet: after them); the chain only drops"

func withoutFirewallJump(rules []string) []string {
	return slices.DeleteFunc(slices.Clone(rules), func(r string) bool { return r == firewallJump })
}

// serviceOfRule returns the service port a rule's comment names.
func serviceOfRule(rule string) (string, bool) {
	c := commentOf(rule)
	if c == "" {
		return "", false
	}
	return nftgen.ServiceOfComment(strings.Trim(c, `"`))
}

func commentOf(rule string) string {
	i := strings.Index(rule, "--comment ")
	if i < 0 {
		return ""
	}
	rest := rule[i+len("--comment "):]
	if strings.HasPrefix(rest, `"`) {
		if j := strings.Index(rest[1:], `"`); j >= 0 {
			return rest[:j+2]
		}
	}
	return strings.Fields(rest)[0]
}

// serviceIndex returns a function that names the Service a rule belongs
// to: from the rule's comment, or else from the comments of the chain it is
// in (KUBE-SEP- and KUBE-SVC- chains carry them).
func serviceIndex(saves ...*SavedTable) func(chain, rule string) string {
	byChain := map[string]string{}
	for _, t := range saves {
		for c, rules := range t.Rules {
			for _, r := range rules {
				if s, ok := serviceOfRule(r); ok && byChain[c] == "" && nftgen.IsKubeProxyChain(c) && !slices.Contains(unordered, c) {
					byChain[c] = s
				}
			}
		}
	}
	return func(chain, rule string) string {
		if s, ok := serviceOfRule(rule); ok {
			return s
		}
		if s := byChain[chain]; s != "" {
			return s
		}
		return "(node-wide)"
	}
}

// Report prints differences grouped by Service.
func Report(w io.Writer, diffs []Difference) {
	if len(diffs) == 0 {
		fmt.Fprintln(w, "no differences")
		return
	}
	drift := DriftCount(diffs)
	bySvc := map[string][]Difference{}
	for _, d := range diffs {
		bySvc[d.Service] = append(bySvc[d.Service], d)
	}
	for _, svc := range slices.Sorted(maps.Keys(bySvc)) {
		fmt.Fprintf(w, "Service %s:\n", svc)
		for _, d := range bySvc[svc] {
			fmt.Fprintf(w, "  %s in %s %s:\n", d.Kind, d.Table, d.Chain)
			if d.Note != "" {
				fmt.Fprintf(w, "    (%s)\n", d.Note)
			}
			if d.Legacy != "" {
				for _, l := range strings.Split(d.Legacy, "\n") {
					fmt.Fprintf(w, "    - %s\n", l)
				}
			}
			if d.Current != "" {
				for _, l := range strings.Split(d.Current, "\n") {
					fmt.Fprintf(w, "    + %s\n", l)
				}
			}
		}
	}
	fmt.Fprintf(w, "%d differences", drift)
	if drift < len(diffs) {
		fmt.Fprintf(w, " (and %d explained by nftproxy's design, not drift)", len(diffs)-drift)
	}
	fmt.Fprintln(w)
}
