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
	if err := b.fill(); err != nil {
		return nil, err
	}
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
// table is filled once every tenant is known, so that each record can
// carry its tenant's name.
type node struct {
	kind, flags uint8
	a, b        int // claim name index (string kinds), or the nodes a pair pairs
	s           string
	tenant      int32
}

// builder collects one node per distinct key, finding keys again through
// maps (Build may allocate), then enters them in the table, once their
// number is known.
type builder struct {
	x       *Index
	strings map[stringKey]int
	pairs   map[pairKey]int
	nodes   []node
	names   []string // by tenant id
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

// maxLoad is the largest fraction of slots in use: tags make probing
// cheap, so the table can be fuller than with slots read from memory, and
// entries take a cache line each.
const maxLoadNum, maxLoadDen = 3, 4

// fill sizes the table to at most maxLoad full and enters every node in
// node order: a pair's nodes come before it, so their slots, which its key
// is made of, are known. It fails if the arena outgrows the 32 bits an
// entry gives an offset.
func (b *builder) fill() error {
	t := &b.x.t
	if len(b.nodes) == 0 {
		return nil // the zero table: Resolve looks nothing up
	}
	n := uint64(1) << bits.Len64(uint64((len(b.nodes)*maxLoadDen-1)/maxLoadNum))
	t.tags, t.mask = make([]uint8, n), n-1
	slots := make([]int, len(b.nodes))
	for j, nd := range b.nodes {
		var h uint64
		if nd.kind == kindPrefix || nd.kind == kindCompound {
			h = pairHash(uint32(slots[nd.a]), uint32(slots[nd.b]))
		} else {
			h = stringHash(t.hashString(nd.s), nd.kind, uint32(nd.a))
		}
		i := h & t.mask
		for t.tags[i] != 0 {
			i = (i + 1) & t.mask
		}
		t.tags[i], slots[j] = tagOf(h), int(i)
	}
	if n*entrySize > maxArena {
		return fmt.Errorf("%d selectors: %w", len(b.nodes), ErrInvalid)
	}
	arena := make([]byte, n*entrySize)
	for j, nd := range b.nodes {
		name := ""
		if nd.tenant >= 0 {
			name = b.names[nd.tenant]
		}
		o := slots[j] * entrySize
		r := arena[o : o+entrySize]
		a, c := uint32(nd.a), uint32(len(nd.s))
		if nd.kind == kindPrefix || nd.kind == kindCompound {
			a, c = uint32(slots[nd.a]), uint32(slots[nd.b])
		}
		r[recKind], r[recFlags] = nd.kind, nd.flags
		binary.LittleEndian.PutUint32(r[recTenant:], uint32(nd.tenant))
		binary.LittleEndian.PutUint32(r[recA:], a)
		binary.LittleEndian.PutUint32(r[recB:], c)
		// Strings that do not fit go after the entries: a hit on them
		// reads another line.
		free := recInline
		for _, f := range [...]struct {
			s   string
			off int
		}{{nd.s, recKey}, {name, recName}} {
			at := len(arena)
			if free+len(f.s) <= entrySize {
				at, free = o+free, free+len(f.s)
				copy(r[at-o:], f.s)
			} else {
				arena = append(arena, f.s...)
				r = arena[o : o+entrySize] // arena may have moved
			}
			if at+len(f.s) > maxArena {
				return fmt.Errorf("selectors and tenant names take more than %d bytes: %w", maxArena, ErrInvalid)
			}
			binary.LittleEndian.PutUint32(r[f.off:], uint32(at))
		}
		binary.LittleEndian.PutUint32(r[recNameN:], uint32(len(name)))
	}
	t.arena = string(arena)
	return nil
}

// Len returns the number of distinct tenants in x.
func (x *Index) Len() int { return x.n }
