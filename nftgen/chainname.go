package nftgen

import (
	"bytes"
	"cmp"
	"encoding/base32"
	"encoding/binary"
	"slices"
	"strings"
)

// packedName is a Service chain's name as Applied keeps it: the index of
// its prefix (KUBE-SVC-, KUBE-SVL-, KUBE-EXT-, KUBE-FW-, KUBE-SEP-) and the
// 80 bits its 16 base32 characters stand for. It holds no pointer, so the
// summaries of 330,000 chains (30,000 Services x 10 endpoints) cost the
// garbage collector nothing to scan and no string of their own: 11 bytes
// where the name took a 16-byte header and a 32-byte string. The zero
// value is a name that does not pack (see FragmentSummary.ChainName).
type packedName struct {
	prefix uint8
	hash   [10]byte
}

// packablePrefix returns the prefix of packed prefix index i (1-based), or
// "".
func packablePrefix(i uint8) string {
	switch i {
	case 1:
		return PrefixService
	case 2:
		return PrefixLocal
	case 3:
		return PrefixExternal
	case 4:
		return PrefixFirewall
	case 5:
		return PrefixEndpoint
	}
	return ""
}

// packName packs name; ok is false when it is not a prefix of
// packablePrefix followed by exactly 16 base32 characters.
func packName(name string) (p packedName, ok bool) {
	for i := uint8(1); ; i++ {
		prefix := packablePrefix(i)
		if prefix == "" {
			return packedName{}, false
		}
		if len(name) != len(prefix)+16 || !strings.HasPrefix(name, prefix) {
			continue
		}
		// Decode skips line breaks; the count and the round trip below
		// take only the one spelling Encode gives.
		n, err := base32.StdEncoding.Decode(p.hash[:], []byte(name[len(prefix):]))
		if err != nil || n != len(p.hash) {
			return packedName{}, false
		}
		p.prefix = i
		var enc [16]byte
		base32.StdEncoding.Encode(enc[:], p.hash[:])
		if string(enc[:]) != name[len(prefix):] {
			return packedName{}, false
		}
		return p, true
	}
}

// compare orders packed names: by prefix, then by hash.
func (p packedName) compare(q packedName) int {
	if c := cmp.Compare(p.prefix, q.prefix); c != 0 {
		return c
	}
	return bytes.Compare(p.hash[:], q.hash[:])
}

// String returns the name p packs ("" for the zero value).
func (p packedName) String() string {
	prefix := packablePrefix(p.prefix)
	if prefix == "" {
		return ""
	}
	var out [32]byte
	b := append(out[:0], prefix...)
	b = b[:len(prefix)+16]
	base32.StdEncoding.Encode(b[len(prefix):], p.hash[:])
	return string(b)
}

// ChainName returns the name of s's chain i.
func (s *FragmentSummary) ChainName(i int) string {
	if p := s.Chains[i].name; p.prefix != 0 {
		return p.String()
	}
	return s.odd.names[i]
}

// chainNamed reports whether s's chain i is named name, without making
// its name.
func (s *FragmentSummary) chainNamed(i int, name string) bool {
	if p := s.Chains[i].name; p.prefix != 0 {
		q, ok := packName(name)
		return ok && p == q
	}
	return s.odd != nil && s.odd.names != nil && s.odd.names[i] == name
}

// EndpointMaps returns the endpoint maps s's chains' numgen rules read.
func (s *FragmentSummary) EndpointMaps() []ChainMap {
	var out []ChainMap
	for i, c := range s.Chains {
		if c.readsMap {
			name := s.ChainName(i)
			out = append(out, ChainMap{Chain: name, Map: EndpointMapName(name)})
		}
	}
	if s.odd != nil {
		out = append(out, s.odd.maps...)
	}
	return out
}

// isEndpointMapOf reports whether m is EndpointMapName(chain), without
// making that name.
func isEndpointMapOf(m, chain string) bool {
	rest, ok := strings.CutPrefix(m, EndpointMapPrefix)
	return ok && rest == endpointMapSuffix(chain)
}

// setChain sets s's chain i to name, digest d and whether it reads the
// endpoint map named after it.
func (s *FragmentSummary) setChain(i int, name string, d uint64, readsMap bool) {
	p, ok := packName(name)
	if !ok {
		odd := s.oddParts()
		if odd.names == nil {
			odd.names = make([]string, len(s.Chains))
		}
		odd.names[i] = name
	}
	s.Chains[i] = ChainDigest{name: p, readsMap: readsMap}
	binary.LittleEndian.PutUint64(s.Chains[i].digest[:], d)
}

// oddParts is what a summary keeps of a fragment nftproxy did not generate:
// the names of its chains that do not pack, by index (nil when all do), and
// the endpoint maps its chains read that are not named after their chain.
type oddParts struct {
	names []string
	maps  []ChainMap
}

// oddParts returns s.odd, made if nil.
func (s *FragmentSummary) oddParts() *oddParts {
	if s.odd == nil {
		s.odd = &oddParts{}
	}
	return s.odd
}

// equal reports whether o holds what p holds. A summary makes its
// oddParts only to put something in it, so nil is the only empty one.
func (p *oddParts) equal(o *oddParts) bool {
	if p == nil || o == nil {
		return p == o
	}
	return slices.Equal(p.names, o.names) && slices.Equal(p.maps, o.maps)
}
