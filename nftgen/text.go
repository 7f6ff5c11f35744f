package nftgen

import (
	"fmt"
	"strings"
)

// Text renders the ruleset in nft syntax, in a form `nft -f` accepts. Maps
// come first, then chains in Ruleset.Chains order.
func (r *Ruleset) Text() string {
	var b strings.Builder
	table := r.Table
	if table == "" {
		table = TableName
	}
	fmt.Fprintf(&b, "table %s %s {\n", r.Family, table)
	for _, name := range r.Top.Counters {
		writeCounter(&b, name)
	}
	for _, m := range r.Maps {
		writeMap(&b, r.Family, m, r.Elements(m.Name))
	}
	for _, set := range r.Sets() {
		writeSet(&b, r.Family, set)
	}
	for _, c := range r.Chains() {
		writeChain(&b, r.Family, c)
	}
	b.WriteString("}\n")
	return b.String()
}

func writeCounter(b *strings.Builder, name string) {
	fmt.Fprintf(b, "\tcounter %s {\n\t}\n", name)
}

func writeMap(b *strings.Builder, f Family, m MapSpec, elems []MapElement) {
	fmt.Fprintf(b, "\tmap %s {\n\t\ttype %s : verdict\n", m.Name, mapKeyType(f, m.Key))
	if m.Comment != "" {
		fmt.Fprintf(b, "\t\tcomment %q\n", m.Comment)
	}
	if len(elems) > 0 {
		b.WriteString("\t\telements = {")
		for i, e := range elems {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n\t\t\t" + e.Text())
		}
		b.WriteString(" }\n")
	}
	b.WriteString("\t}\n")
}

func writeSet(b *strings.Builder, f Family, s SetSpec) {
	fmt.Fprintf(b, "\tset %s {\n\t\ttype %s\n\t\tflags dynamic,timeout\n\t\ttimeout %ds\n\t}\n", s.Name, s.keyType(f), s.TimeoutSeconds)
}

func addrType(f Family) string {
	if f == FamilyIPv6 {
		return "ipv6_addr"
	}
	return "ipv4_addr"
}

func mapKeyType(f Family, k KeyKind) string {
	if k == KeyProtoPort {
		return "inet_proto . inet_service"
	}
	return addrType(f) + " . inet_proto . inet_service"
}

func (e MapElement) Text() string {
	s := fmt.Sprintf("%s . %d", ProtoName(e.Key.Proto), e.Key.Port)
	if e.Key.Addr.IsValid() {
		s = e.Key.Addr.String() + " . " + s
	}
	if e.Comment != "" {
		s += fmt.Sprintf(" comment %q", e.Comment)
	}
	return s + " : " + e.Verdict.nft("")
}

func writeChain(b *strings.Builder, f Family, c *Chain) {
	fmt.Fprintf(b, "\tchain %s {\n", c.Name)
	if c.Base != nil {
		fmt.Fprintf(b, "\t\ttype %s hook %s priority %d; policy accept;\n", c.Base.Type, c.Base.Hook, c.Base.Priority)
	}
	for i := range c.Rules {
		b.WriteString("\t\t" + c.Rules[i].Text(f) + "\n")
	}
	b.WriteString("\t}\n")
}

// Text returns the chain in nft syntax, as `nft list` prints it.
func (c *Chain) Text(f Family) string {
	var b strings.Builder
	writeChain(&b, f, c)
	return b.String()
}
