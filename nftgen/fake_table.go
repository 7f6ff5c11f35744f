package nftgen

import (
	"fmt"
	"slices"
	"syscall"
)

// apply makes one operation on the table, checking it as the kernel
// does. It is one case per operation kind, which reads best as one switch.
func (t *fakeTable) apply(op Op) error {
	switch op.Kind {
	case OpAddChain:
		if c, ok := t.chains[op.Name]; ok {
			if (c.Base == nil) != (op.Base == nil) || (c.Base != nil && *c.Base != *op.Base) {
				return errorf(syscall.EEXIST, "chain exists with another hook")
			}
			return nil
		}
		t.chains[op.Name] = &Chain{Name: op.Name, Base: op.Base}
	case OpFlushChain:
		c, ok := t.chains[op.Name]
		if !ok {
			return errorf(syscall.ENOENT, "no chain")
		}
		c.Rules = nil
	case OpDeleteChain:
		c, ok := t.chains[op.Name]
		if !ok {
			return errorf(syscall.ENOENT, "no chain")
		}
		if len(c.Rules) > 0 || t.chainInUse(op.Name) {
			return errorf(syscall.EBUSY, "chain in use")
		}
		delete(t.chains, op.Name)
	case OpAddRule:
		return t.addRule(op)
	case OpAddCounter:
		t.counters[op.Name] = true
	case OpAddSet:
		if _, ok := t.maps[op.Name]; ok || t.endpointMaps[op.Name] != nil {
			return errorf(syscall.EEXIST, "a map has that name")
		}
		if old, ok := t.sets[op.Name]; ok && old != *op.Set {
			return errorf(syscall.EEXIST, "set exists with another timeout")
		}
		t.sets[op.Name] = *op.Set
	case OpDeleteSet:
		return t.deleteSet(op)
	case OpAddMap:
		if _, ok := t.maps[op.Name]; !ok {
			t.maps[op.Name] = map[MapKey]MapElement{}
			t.specs[op.Name] = *op.Map
		}
	case OpFlushMap:
		if _, ok := t.maps[op.Name]; !ok {
			return errorf(syscall.ENOENT, "no map")
		}
		t.maps[op.Name] = map[MapKey]MapElement{}
	case OpDeleteMap:
		return t.deleteMap(op)
	case OpAddElement:
		return t.addElement(op)
	case OpDeleteElement:
		m, ok := t.maps[op.Name]
		if !ok {
			return errorf(syscall.ENOENT, "no map")
		}
		if _, ok := m[op.Element.Key]; !ok {
			return errorf(syscall.ENOENT, "no element")
		}
		delete(m, op.Element.Key)
	default:
		return fmt.Errorf("unknown op %q", op.Kind)
	}
	return nil
}

// addRule appends a rule, as the kernel checks it: every chain, map, set
// and counter it names must exist, and its endpoint maps must not.
func (t *fakeTable) addRule(op Op) error {
	c, ok := t.chains[op.Name]
	if !ok {
		return errorf(syscall.ENOENT, "no chain")
	}
	for _, ref := range ruleChainRefs(op.Rule) {
		if _, ok := t.chains[ref]; !ok {
			return errorf(syscall.ENOENT, "no chain %s", ref)
		}
	}
	for _, ref := range ruleMapRefs(op.Rule) {
		if _, ok := t.maps[ref]; !ok {
			return errorf(syscall.ENOENT, "no map %s", ref)
		}
	}
	for _, ref := range ruleSetRefs(op.Rule) {
		if _, ok := t.sets[ref]; !ok {
			return errorf(syscall.ENOENT, "no set %s", ref)
		}
	}
	for _, ref := range ruleCounterRefs(op.Rule) {
		if !t.counters[ref] {
			return errorf(syscall.ENOENT, "no counter %s", ref)
		}
	}
	for _, s := range op.Rule.Stmts {
		if v, ok := s.(NumgenVmap); ok && v.Map != "" {
			if t.hasSet(v.Map) {
				return errorf(syscall.EEXIST, "endpoint map %s exists", v.Map)
			}
			t.endpointMaps[v.Map] = v.Targets
		}
	}
	c.Rules = append(c.Rules, *op.Rule)
	return nil
}

// deleteSet deletes an endpoint map or a set no rule uses, or else a map.
func (t *fakeTable) deleteSet(op Op) error {
	if _, ok := t.endpointMaps[op.Name]; ok {
		for _, c := range t.chains {
			if slices.Contains(c.EndpointMaps(), op.Name) {
				return errorf(syscall.EBUSY, "endpoint map in use")
			}
		}
		delete(t.endpointMaps, op.Name)
		return nil
	}
	if _, ok := t.sets[op.Name]; ok {
		for _, c := range t.chains {
			for i := range c.Rules {
				if slices.Contains(ruleSetRefs(&c.Rules[i]), op.Name) {
					return errorf(syscall.EBUSY, "set in use")
				}
			}
		}
		delete(t.sets, op.Name)
		return nil
	}
	return t.apply(Op{Kind: OpDeleteMap, Name: op.Name})
}

// deleteMap deletes a map no rule uses.
func (t *fakeTable) deleteMap(op Op) error {
	if _, ok := t.maps[op.Name]; !ok {
		return errorf(syscall.ENOENT, "no map")
	}
	for _, c := range t.chains {
		for i := range c.Rules {
			if slices.Contains(ruleMapRefs(&c.Rules[i]), op.Name) {
				return errorf(syscall.EBUSY, "map in use")
			}
		}
	}
	delete(t.maps, op.Name)
	delete(t.specs, op.Name)
	return nil
}

// addElement adds a map element; its verdict's chain must exist.
func (t *fakeTable) addElement(op Op) error {
	m, ok := t.maps[op.Name]
	if !ok {
		return errorf(syscall.ENOENT, "no map")
	}
	if old, ok := m[op.Element.Key]; ok && old.Verdict != op.Element.Verdict {
		return errorf(syscall.EEXIST, "element exists")
	}
	if ch := op.Element.Verdict.Chain; ch != "" {
		if _, ok := t.chains[ch]; !ok {
			return errorf(syscall.ENOENT, "no chain %s", ch)
		}
	}
	m[op.Element.Key] = *op.Element
	return nil
}

// hasSet reports whether the table has a set or map of that name.
func (t *fakeTable) hasSet(name string) bool {
	_, isMap := t.maps[name]
	_, isSet := t.sets[name]
	_, isEndpointMap := t.endpointMaps[name]
	return isMap || isSet || isEndpointMap
}

func (t *fakeTable) chainInUse(name string) bool {
	for _, c := range t.chains {
		for i := range c.Rules {
			if slices.Contains(ruleChainRefs(&c.Rules[i]), name) {
				return true
			}
		}
	}
	for _, m := range t.maps {
		for _, e := range m {
			if e.Verdict.Chain == name {
				return true
			}
		}
	}
	for _, targets := range t.endpointMaps {
		if slices.Contains(targets, name) {
			return true
		}
	}
	return false
}

// ruleChainRefs returns the chains a rule jumps to.
func ruleChainRefs(r *Rule) []string {
	var out []string
	for _, s := range r.Stmts {
		switch s := s.(type) {
		case Verdict:
			if s.Chain != "" {
				out = append(out, s.Chain)
			}
		case NumgenVmap:
			out = append(out, s.Targets...)
		case AffinityCheck:
			out = append(out, s.Chain)
		}
	}
	return out
}

// ruleSetRefs returns the dynamic sets a rule uses.
func ruleSetRefs(r *Rule) []string {
	var out []string
	for _, s := range r.Stmts {
		switch s := s.(type) {
		case AffinityCheck:
			out = append(out, s.Set)
		case AffinityUpdate:
			out = append(out, s.Set)
		}
	}
	return out
}

// ruleCounterRefs returns the named counters a rule counts in.
func ruleCounterRefs(r *Rule) []string {
	var out []string
	for _, s := range r.Stmts {
		if c, ok := s.(CounterRef); ok {
			out = append(out, c.Name)
		}
	}
	return out
}

// ruleMapRefs returns the named maps a rule looks up.
func ruleMapRefs(r *Rule) []string {
	var out []string
	for _, s := range r.Stmts {
		switch s := s.(type) {
		case DispatchMap:
			out = append(out, s.Map)
		case ProtoPortMap:
			out = append(out, s.Map)
		case ProtoPortIn:
			out = append(out, s.Map)
		}
	}
	return out
}
