//go:build linux

package kernel

import (
	"fmt"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
)

// batchWriter encodes a transaction's operations, in order, into the
// messages of one batch. Its encoders add each message to the batch as
// they make it, so the batch's order is the order of the calls.
type batchWriter struct {
	// objs encodes what is not a rule.
	objs *objEncoder
	// scratch is reused to build rule messages, which are added to batch.
	scratch []byte
	batch   *wireBatch
	// exprs turns a rule's statements into expressions, into exprBuf;
	// userData holds its comment. All three are reused from rule to rule
	// (ruleMessage copies what it keeps); ruleChain and anonErr are the
	// chain of the rule being added and an error of its endpoint map.
	exprs     *exprBuilder
	exprBuf   []expr.Any
	userData  []byte
	ruleChain string
	anonErr   error
	table     *nftables.Table
	family    nftgen.Family
}

// addrType is the type of an address of family f.
func addrType(f nftgen.Family) nftables.SetDatatype {
	if f == nftgen.FamilyIPv6 {
		return nftables.TypeIP6Addr
	}
	return nftables.TypeIPAddr
}

// keyTypes are the types of the fields of a key of kind k in family f.
func keyTypes(f nftgen.Family, k nftgen.KeyKind) []nftables.SetDatatype {
	switch k {
	case nftgen.KeyAddr:
		return []nftables.SetDatatype{addrType(f)}
	case nftgen.KeyProtoPort:
		return []nftables.SetDatatype{nftables.TypeInetProto, nftables.TypeInetService}
	}
	return []nftables.SetDatatype{addrType(f), nftables.TypeInetProto, nftables.TypeInetService}
}

// serviceMap returns a named verdict map. The key type only matters when
// the map is created.
func (w *batchWriter) serviceMap(name string, spec *nftgen.MapSpec) *nftables.Set {
	s := &nftables.Set{Table: w.table, Name: name, IsMap: true, Concatenation: true, DataType: nftables.TypeVerdict}
	if spec != nil {
		s.Comment = spec.Comment
		s.KeyType = nftables.MustConcatSetType(keyTypes(w.family, spec.Key)...)
	}
	return s
}

var hooks = map[nftgen.Hook]*nftables.ChainHook{
	nftgen.HookPrerouting:  nftables.ChainHookPrerouting,
	nftgen.HookInput:       nftables.ChainHookInput,
	nftgen.HookForward:     nftables.ChainHookForward,
	nftgen.HookOutput:      nftables.ChainHookOutput,
	nftgen.HookPostrouting: nftables.ChainHookPostrouting,
}

// write queues ops[i] (and the element operations on the same map that
// follow it, as one message) and returns the index of the next op.
func (w *batchWriter) write(ops []nftgen.Op, i int) (int, error) {
	op := ops[i]
	w.useTable(op.Table)
	if op.Kind == nftgen.OpAddChain && op.Base == nil {
		// A chain without a hook (a cold sync adds a million of them).
		w.objs.addRegularChain(op.Name)
		return i + 1, nil
	}
	switch op.Kind {
	case nftgen.OpAddTable:
		w.objs.addTable()
	case nftgen.OpDeleteTable:
		w.objs.deleteTable()
	case nftgen.OpAddChain:
		w.objs.addBaseChain(chainOf(w.table, op.Name, op.Base))
	case nftgen.OpFlushChain:
		w.objs.flushChain(op.Name)
	case nftgen.OpDeleteChain:
		w.objs.deleteChain(op.Name)
	case nftgen.OpAddRule:
		if err := w.addRule(op); err != nil {
			return i, err
		}
	case nftgen.OpAddMap:
		if err := w.addSet(w.serviceMap(op.Name, op.Map), nil); err != nil {
			return i, err
		}
	case nftgen.OpFlushMap:
		w.objs.flushSet(op.Name)
	case nftgen.OpDeleteMap, nftgen.OpDeleteSet:
		w.objs.deleteSet(op.Name)
	case nftgen.OpAddSet:
		set := &nftables.Set{
			Table:      w.table,
			Name:       op.Name,
			KeyType:    addrType(w.family),
			Dynamic:    true,
			HasTimeout: true,
			Timeout:    time.Duration(op.Set.TimeoutSeconds) * time.Second,
		}
		if op.Set.ByEndpoint { // "client . endpoint address . port"
			set.KeyType = nftables.MustConcatSetType(addrType(w.family), addrType(w.family), nftables.TypeInetService)
			set.Concatenation = true
		}
		if err := w.addSet(set, nil); err != nil {
			return i, err
		}
	case nftgen.OpAddCounter:
		w.objs.addCounter(op.Name)
	case nftgen.OpAddElement, nftgen.OpDeleteElement:
		j := i
		var elems []nftables.SetElement
		for ; j < len(ops) && ops[j].Kind == op.Kind && ops[j].Name == op.Name && ops[j].Table == op.Table; j++ {
			e := ops[j].Element
			elems = append(elems, nftables.SetElement{
				Key:         mapKeyBytes(e.Key),
				VerdictData: verdictExpr(e.Verdict),
				Comment:     e.Comment,
			})
		}
		typ := unix.NFT_MSG_NEWSETELEM
		if op.Kind == nftgen.OpDeleteElement {
			typ = unix.NFT_MSG_DELSETELEM
		}
		w.objs.elements(typ, &nftables.Set{Name: op.Name}, elems)
		return j, nil
	default:
		return i, fmt.Errorf("unknown op %q", op.Kind)
	}
	return i + 1, nil
}

// useTable makes the messages that follow act on table name (TableName
// when empty): a transaction of a sharded layout spans several tables.
func (w *batchWriter) useTable(name string) {
	if name == "" {
		name = nftgen.TableName
	}
	if w.table.Name == name {
		return
	}
	w.table = &nftables.Table{Name: name, Family: w.table.Family}
	w.objs.table = name
}

// addEndpointMap declares the numgen map of the rule being added to
// w.ruleChain in the batch, by the name the rule gives it, and returns its
// name and ID (exprBuilder's addAnon); an error is left in w.anonErr.
func (w *batchWriter) addEndpointMap(m anonVmap) (string, uint32) {
	if !nftgen.IsEndpointMap(m.Map) {
		w.anonErr = fmt.Errorf("numgen rule of chain %s names no endpoint map (%q)", w.ruleChain, m.Map)
	}
	set := &nftables.Set{
		Table:    w.table,
		Name:     m.Map,
		IsMap:    true,
		KeyType:  nftables.TypeMark,
		DataType: nftables.TypeVerdict,
	}
	elems := make([]nftables.SetElement, len(m.Targets))
	for i, t := range m.Targets {
		elems[i] = nftables.SetElement{Key: native32(uint32(i)), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: t}}
		if i < len(m.Comments) {
			elems[i].Comment = m.Comments[i]
		}
	}
	if err := w.addSet(set, elems); err != nil {
		w.anonErr = err
	}
	return set.Name, set.ID
}

// addSet declares set with elems.
func (w *batchWriter) addSet(set *nftables.Set, elems []nftables.SetElement) error {
	_, err := w.objs.addSet(set, elems)
	return err
}

func (w *batchWriter) addRule(op nftgen.Op) error {
	if w.exprs == nil {
		w.exprs = &exprBuilder{family: w.family, addAnon: w.addEndpointMap}
	}
	w.ruleChain, w.anonErr = op.Name, nil
	exprs, err := w.exprs.appendRuleExprs(w.exprBuf[:0], op.Rule)
	if err != nil {
		return err
	}
	w.exprBuf = exprs
	if w.anonErr != nil {
		return w.anonErr
	}
	var userData []byte
	if op.Rule.Comment != "" {
		w.userData = appendComment(w.userData[:0], op.Rule.Comment)
		userData = w.userData
	}
	_, err = ruleMessage(w.table.Family, w.table.Name, op.Name, exprs, userData, &w.scratch, w.batch)
	return err
}

// chainOf returns the chain name of table, a base chain as base says (nil:
// a regular chain).
func chainOf(table *nftables.Table, name string, base *nftgen.BaseChain) *nftables.Chain {
	ch := &nftables.Chain{Table: table, Name: name}
	if base == nil {
		return ch
	}
	ch.Hooknum = hooks[base.Hook]
	ch.Priority = nftables.ChainPriorityRef(nftables.ChainPriority(base.Priority))
	ch.Type = nftables.ChainTypeFilter
	if base.Type == nftgen.NATType {
		ch.Type = nftables.ChainTypeNAT
	}
	// Always said: a chain that exists keeps its policy unless the message
	// names one, and another process may have set drop.
	accept := nftables.ChainPolicyAccept
	ch.Policy = &accept
	return ch
}
