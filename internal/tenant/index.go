package tenant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
)

// ambiguous is stored for a selector that two different tenants list: any
// principal it matches is refused.
const ambiguous = -1

// Index maps principals to tenants. It is immutable once [Build] returns it
// and safe for concurrent use; to apply a change, build a new one and swap
// it in (an atomic.Pointer). The zero Index matches no principal.
type Index struct {
	n int // distinct tenants

	// A principal carries claims no selector names (sub, email, iat...);
	// names skips them before their values are hashed.
	claims nameSet
	t      table

	// hasClaims is false when no selector names a claim, so that the
	// principal's claims are not read; hasGroups likewise for its groups
	// and hasCompound for its issuer.
	hasClaims, hasGroups, hasCompound bool
}

// Build indexes the selectors of every tenant. It rejects an empty tenant
// name, a tenant without selectors and a selector of no valid [Shape],
// reporting every problem at once, each wrapping [ErrInvalid]. A selector
// listed twice for the same tenant is harmless; one listed for two tenants
// is kept, and every principal it matches is refused with [ErrAmbiguous].
func Build(tenants []TenantSelectors) (*Index, error) {
	if err := validate(tenants); err != nil {
		return nil, err
	}
	b := newBuilder()
	ids := make(map[string]int32, len(tenants))
	for _, ts := range tenants {
		id, ok := ids[ts.Tenant]
		if !ok {
			id = int32(len(b.names))
			ids[ts.Tenant] = id
			b.names = append(b.names, ts.Tenant)
		}
		for _, s := range ts.Selectors {
			b.add(s, id)
		}
	}
	if err := b.layout(); err != nil {
		return nil, err
	}
	b.fill()
	b.x.claims.freeze()
	b.x.n = len(b.names)
	return b.x, nil
}

func validate(tenants []TenantSelectors) error {
	var errs []error
	for i, ts := range tenants {
		if ts.Tenant == "" {
			errs = append(errs, fmt.Errorf("tenant %d: empty name: %w", i, ErrInvalid))
		}
		if len(ts.Selectors) == 0 {
			errs = append(errs, fmt.Errorf("tenant %q: no selectors: %w", ts.Tenant, ErrInvalid))
		}
		for j, s := range ts.Selectors {
			if s.Shape() == ShapeInvalid {
				errs = append(errs, fmt.Errorf("tenant %q selector %d %+v: %w", ts.Tenant, j, s, ErrInvalid))
			}
		}
	}
	if len(tenants) > 1<<31-1 {
		errs = append(errs, fmt.Errorf("%d tenants: %w", len(tenants), ErrInvalid))
	}
	return errors.Join(errs...)
}

type stringKey struct {
	kind uint8
	name uint32
	s    string
}

type pairKey struct {
	kind uint8
	a, b int // nodes
}

// node is one key, and so one record, while Build collects them: the
// arena is laid out once every tenant is known, so that each record can
// carry its tenant's name.
type node struct {
	kind, flags uint8
	a, b        int // claim name index (string kinds), or the nodes a pair pairs
	s           string
	tenant      int32
}

// builder collects one node per distinct key, finding keys again through
// maps (Build may allocate), then lays the records out in the arena and
// fills the slots, once their number is known.
type builder struct {
	x       *Index
	strings map[stringKey]int
	pairs   map[pairKey]int
	nodes   []node
	names   []string // by tenant id
	hashes  []uint64 // of the records, in node order
	offs    []int    // of the records, in node order
}

func newBuilder() *builder {
	return &builder{
		x:       &Index{t: table{seed: maphash.MakeSeed()}},
		strings: map[stringKey]int{},
		pairs:   map[pairKey]int{},
	}
}

func (b *builder) add(s Selector, id int32) {
	switch s.Shape() {
	case ShapeClaim:
		b.put(b.claim(s.Claim, s.Value, roleClaim), id)
	case ShapeGroup:
		b.x.hasGroups = true
		b.put(b.str(kindGroup, 0, s.Group), id)
	case ShapeCompound:
		b.x.hasGroups, b.x.hasCompound = true, true
		c := b.claim(s.Claim, s.Value, roleCompound)
		b.nodes[c].flags |= flagCompound
		prefix := b.pair(kindPrefix, b.str(kindIssuer, 0, s.Issuer), c)
		b.put(b.pair(kindCompound, prefix, b.str(kindGroup, 0, s.Group)), id)
	}
}

func (b *builder) claim(name, value string, r role) int {
	b.x.hasClaims = true
	return b.str(kindClaim, b.x.claims.add(name, r), value)
}

// put records that tenant id lists the selector of node n.
func (b *builder) put(n int, id int32) {
	if old := b.nodes[n].tenant; old != noTenant && old != id {
		id = ambiguous
	}
	b.nodes[n].tenant = id
}

// str returns the node of a string key, adding it first if it is new.
func (b *builder) str(kind uint8, name uint32, s string) int {
	k := stringKey{kind, name, s}
	if n, ok := b.strings[k]; ok {
		return n
	}
	b.nodes = append(b.nodes, node{kind: kind, a: int(name), s: s, tenant: noTenant})
	b.strings[k] = len(b.nodes) - 1
	return len(b.nodes) - 1
}

// pair returns the node of the pair key of kind for nodes a and c, adding
// it first if it is new.
func (b *builder) pair(kind uint8, a, c int) int {
	k := pairKey{kind, a, c}
	if n, ok := b.pairs[k]; ok {
		return n
	}
	b.nodes = append(b.nodes, node{kind: kind, a: a, b: c, tenant: noTenant})
	b.pairs[k] = len(b.nodes) - 1
	return len(b.nodes) - 1
}

// layout writes one record per node to the arena, in node order (a pair's
// nodes come before it, so their offsets are known), each 8-byte aligned
// and, when it fits in a cache line, not straddling two, so that a hit
// reads one line of the arena. It fails if the arena outgrows the 32 bits
// a slot gives an offset.
func (b *builder) layout() error {
	t := &b.x.t
	var arena []byte
	b.hashes, b.offs = make([]uint64, len(b.nodes)), make([]int, len(b.nodes))
	for i, n := range b.nodes {
		name := ""
		if n.tenant >= 0 {
			name = b.names[n.tenant]
		}
		size := (recHeader + len(n.s) + len(name) + 7) &^ 7
		o := len(arena)
		if size <= 64 && o%64+size > 64 {
			o = (o + 63) &^ 63
		}
		if o+size > maxArena {
			return fmt.Errorf("selectors and tenant names take more than %d bytes: %w", maxArena, ErrInvalid)
		}
		arena = append(arena, make([]byte, o+size-len(arena))...)
		a, c := uint32(n.a), uint32(len(n.s))
		if n.kind == kindPrefix || n.kind == kindCompound {
			a, c = uint32(b.offs[n.a]), uint32(b.offs[n.b])
			b.hashes[i] = pairHash(a, c)
		} else {
			b.hashes[i] = stringHash(t.hashString(n.s), n.kind, a)
		}
		r := arena[o:]
		r[recKind], r[recFlags] = n.kind, n.flags
		binary.LittleEndian.PutUint32(r[recA:], a)
		binary.LittleEndian.PutUint32(r[recB:], c)
		binary.LittleEndian.PutUint32(r[recTenant:], uint32(n.tenant))
		binary.LittleEndian.PutUint32(r[recNameN:], uint32(len(name)))
		copy(r[recHeader+copy(r[recHeader:], n.s):], name)
		b.offs[i] = o
	}
	t.arena = string(arena)
	return nil
}

// fill sizes the slots to at most half full, which keeps linear probes
// short, and enters every record.
func (b *builder) fill() {
	t := &b.x.t
	if len(b.offs) == 0 {
		return // the zero table: Resolve looks nothing up
	}
	n := uint64(1) << bits.Len64(uint64(2*len(b.offs)-1))
	t.slots, t.mask = make([]uint64, n), n-1
	for j, h := range b.hashes {
		i := h & t.mask
		for t.slots[i] != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = h>>32<<32 | uint64(b.offs[j]+1)
	}
}

// Len returns the number of distinct tenants in x.
func (x *Index) Len() int { return x.n }
