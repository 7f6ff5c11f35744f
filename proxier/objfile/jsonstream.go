package objfile

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"strings"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
	"github.com/modern-go/reflect2"
)

// document is one JSON document or top-level array element. Its items,
// when it is a List, are not gathered: each is trimmed and kept as soon as
// it is read (see itemSink), so only one item exists untrimmed at a time.
// A List of 30,000 Services and their slices decoded whole was 130 MB
// before it was trimmed to 40.
type document struct {
	object
	// Items shadows object.Items: a List's items at the top level.
	Items itemStream `json:"items"`
}

// itemStream is the type of a document's items; the decoder that
// newJSONAPI registers for it hands each item to the itemSink of the
// iterator's Attachment.
type itemStream struct{}

// itemSink keeps the items of the document being decoded.
type itemSink struct {
	o *Objects
	// where names the document, add says whether to keep what it holds
	// (not once an earlier object failed).
	where string
	add   bool
	// before is what o kept before the document's items, set once they
	// start; err is the first item's error.
	before *mark
	err    error
}

// read keeps the items iter is at, in place of those of an earlier
// "items" field of the same document (the last one counts, as in
// encoding/json).
func (s *itemSink) read(iter *jsoniter.Iterator) {
	if s.before == nil {
		m := s.o.mark()
		s.before = &m
	} else {
		s.o.rollback(*s.before)
		s.err = nil
	}
	switch iter.WhatIsNext() {
	case jsoniter.NilValue:
		iter.Skip()
	case jsoniter.ArrayValue:
		i := 0
		iter.ReadArrayCB(func(it *jsoniter.Iterator) bool {
			if it.WhatIsNext() == jsoniter.NilValue {
				it.Skip() // null, as encoding/json leaves it
			} else {
				item := new(object)
				it.ReadVal(item)
				if it.Error == nil && s.add && s.err == nil {
					s.err = s.o.addObject(item, fmt.Sprintf("%s, items[%d]", s.where, i))
				}
			}
			i++
			return it.Error == nil
		})
	default:
		var items []*object
		iter.ReadVal(&items) // fails, as the struct's own decode would
	}
}

// itemsDecoder decodes an itemStream.
type itemsDecoder struct{}

// Decode hands the items to the iterator's itemSink.
func (itemsDecoder) Decode(_ unsafe.Pointer, iter *jsoniter.Iterator) {
	sink, ok := iter.Attachment.(*itemSink)
	if !ok {
		iter.ReportError("decode items", "no item sink")
		return
	}
	sink.read(iter)
}

// itemsExtension makes itemsDecoder the decoder of itemStream.
type itemsExtension struct{ jsoniter.DummyExtension }

// CreateDecoder returns itemsDecoder for itemStream, nil for other types.
func (*itemsExtension) CreateDecoder(typ reflect2.Type) jsoniter.ValDecoder {
	if typ.Type1() == reflect.TypeFor[itemStream]() {
		return itemsDecoder{}
	}
	return nil
}

// newJSONAPI returns jsoniter's configuration compatible with
// encoding/json, with the decoder of itemStream.
func newJSONAPI() jsoniter.API {
	api := jsoniter.Config{EscapeHTML: true, SortMapKeys: true, ValidateJsonRawMessage: true}.Froze()
	api.RegisterExtension(&itemsExtension{})
	return api
}

// addJSON decodes a stream of JSON documents (objects, Lists, arrays) in
// one pass and keeps them; ok is false, with nothing kept, when the stream
// does not decode so (invalid JSON, a field of a wrong type), for
// eachDocument's slower way to say where. The error returned is the first
// object's, in file order, once the whole stream has decoded: the one the
// document-by-document way returns.
func (o *Objects) addJSON(iter *jsoniter.Iterator) (ok bool, err error) {
	var first error
	for n := 1; ; n++ {
		next := iter.WhatIsNext()
		if errors.Is(iter.Error, io.EOF) {
			break
		}
		if iter.Error != nil || next == jsoniter.InvalidValue || next == jsoniter.NilValue {
			o.reset()
			return false, nil
		}
		where := fmt.Sprintf("document %d", n)
		if next == jsoniter.ArrayValue {
			i := 0
			iter.ReadArrayCB(func(it *jsoniter.Iterator) bool {
				if err := o.addDocument(it, fmt.Sprintf("%s, items[%d]", where, i), first == nil); first == nil {
					first = err
				}
				i++
				return it.Error == nil
			})
		} else if err := o.addDocument(iter, where, first == nil); first == nil {
			first = err
		}
		if iter.Error != nil && !errors.Is(iter.Error, io.EOF) {
			o.reset()
			return false, nil
		}
	}
	return true, first
}

// addDocument decodes the document iter is at and, when add is true,
// keeps it as addObject does. A List's items were kept as they were read;
// when the document turns out not to be a List, they are let go again.
func (o *Objects) addDocument(iter *jsoniter.Iterator, where string, add bool) error {
	sink := &itemSink{o: o, where: where, add: add}
	iter.Attachment = sink
	var doc document
	iter.ReadVal(&doc)
	iter.Attachment = nil
	if iter.Error != nil && !errors.Is(iter.Error, io.EOF) {
		return nil
	}
	if strings.HasSuffix(doc.Kind, "List") {
		return sink.err
	}
	if sink.before != nil {
		o.rollback(*sink.before)
	}
	if !add {
		return nil
	}
	return o.addObject(&doc.object, where)
}

// mark is how many objects of each kind were kept, to let go of what a
// document kept when it turns out not to be a List.
type mark struct {
	services, slices, nodes      int
	parsedServices, parsedSlices int
	ipv6                         bool
	ignored                      map[string]int
}

// mark returns what o keeps now.
func (o *Objects) mark() mark {
	m := mark{services: len(o.Services), slices: len(o.EndpointSlices), nodes: len(o.Nodes), ipv6: o.IPv6Service, ignored: maps.Clone(o.Ignored)}
	if o.Parsed != nil {
		m.parsedServices, m.parsedSlices = len(o.Parsed.Services), len(o.Parsed.Slices)
	}
	return m
}

// rollback lets go of what was kept after m.
func (o *Objects) rollback(m mark) {
	o.Services, o.EndpointSlices, o.Nodes = truncate(o.Services, m.services), truncate(o.EndpointSlices, m.slices), truncate(o.Nodes, m.nodes)
	if o.Parsed != nil {
		o.Parsed.Services = truncate(o.Parsed.Services, m.parsedServices)
		o.Parsed.Slices = truncate(o.Parsed.Slices, m.parsedSlices)
	}
	o.IPv6Service = m.ipv6
	o.Ignored = maps.Clone(m.ignored)
}

// truncate returns the first n of s, nil for none, as if no more had been
// appended.
func truncate[T any](s []*T, n int) []*T {
	clear(s[n:])
	if n == 0 {
		return nil
	}
	return s[:n]
}

// reset lets go of everything kept.
func (o *Objects) reset() {
	o.Services, o.EndpointSlices, o.Nodes = nil, nil, nil
	if o.Parsed != nil {
		o.Parsed.Services, o.Parsed.Slices = nil, nil
	}
	o.IPv6Service = false
	o.Ignored = map[string]int{}
}
