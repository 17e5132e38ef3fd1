package tenant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"strings"
)

// ambiguous is stored for a selector that two different tenants list: any
// principal it matches is refused.
const ambiguous = -1

// Index maps principals to tenants. It is immutable once [Build] returns it
// and safe for concurrent use; to apply a change, build a new one and swap
// it in (an atomic.Pointer). The zero Index matches no principal.
type Index struct {
	tenants []string // by id; ids are the records' tenants
	names   string   // every tenant's name, concatenated; tenants are substrings

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
	var names strings.Builder
	for _, ts := range tenants {
		id, ok := ids[ts.Tenant]
		if !ok {
			id = int32(len(b.names))
			ids[ts.Tenant] = id
			b.names = append(b.names, [2]uint32{uint32(names.Len()), uint32(len(ts.Tenant))})
			names.WriteString(ts.Tenant)
		}
		for _, s := range ts.Selectors {
			b.add(s, id)
		}
	}
	if len(b.x.t.arena) > maxArena || names.Len() > maxArena {
		return nil, fmt.Errorf("selectors and tenant names take %d and %d bytes, more than %d: %w",
			len(b.x.t.arena), names.Len(), maxArena, ErrInvalid)
	}
	b.fill()
	b.x.claims.freeze()
	x := b.x
	x.names = names.String()
	x.tenants = make([]string, len(b.names))
	for i, n := range b.names {
		x.tenants[i] = x.names[n[0] : n[0]+n[1]]
	}
	return x, nil
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
	a, b uint32
}

// builder appends one record per distinct key to the arena, finding keys
// again through maps (Build may allocate), and fills the slots at the end,
// when their number is known.
type builder struct {
	x       *Index
	strings map[stringKey]int
	pairs   map[pairKey]int
	hashes  []uint64 // of the records, in arena order
	offs    []int
	names   [][2]uint32 // by tenant id: offset and length in Index.names
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
		b.x.t.arena[c+recFlags] |= flagCompound
		prefix := b.pair(kindPrefix, b.str(kindIssuer, 0, s.Issuer), c)
		b.put(b.pair(kindCompound, prefix, b.str(kindGroup, 0, s.Group)), id)
	}
}

func (b *builder) claim(name, value string, r role) int {
	b.x.hasClaims = true
	return b.str(kindClaim, b.x.claims.add(name, r), value)
}

// put records that tenant id lists the selector of record o.
func (b *builder) put(o int, id int32) {
	if old := b.x.t.tenant(o); old != noTenant && old != id {
		id = ambiguous
	}
	r := b.x.t.arena[o:]
	binary.LittleEndian.PutUint32(r[recTenant:], uint32(id))
	if id != ambiguous {
		binary.LittleEndian.PutUint32(r[recName:], b.names[id][0])
		binary.LittleEndian.PutUint32(r[recNameN:], b.names[id][1])
	}
}

// str returns the offset of the record for a string key, appending it
// first if it is new.
func (b *builder) str(kind uint8, name uint32, s string) int {
	k := stringKey{kind, name, s}
	if o, ok := b.strings[k]; ok {
		return o
	}
	o := b.record(kind, name, uint32(len(s)), s, stringHash(b.x.t.hashString(s), kind, name))
	b.strings[k] = o
	return o
}

// pair returns the offset of the pair record of kind for records a and b,
// appending it first if it is new.
func (b *builder) pair(kind uint8, a, c int) int {
	k := pairKey{kind, uint32(a), uint32(c)}
	if o, ok := b.pairs[k]; ok {
		return o
	}
	o := b.record(kind, k.a, k.b, "", pairHash(k.a, k.b))
	b.pairs[k] = o
	return o
}

// record appends a record, 8-byte aligned and, when it fits in a cache
// line, not straddling two, so that a hit reads one line of the arena.
func (b *builder) record(kind uint8, a, c uint32, s string, h uint64) int {
	arena := b.x.t.arena
	size := (recHeader + len(s) + 7) &^ 7
	o := len(arena)
	if size <= 64 && o%64+size > 64 {
		o = (o + 63) &^ 63
	}
	arena = append(arena, make([]byte, o+size-len(arena))...)
	r := arena[o:]
	r[recKind] = kind
	binary.LittleEndian.PutUint32(r[recA:], a)
	binary.LittleEndian.PutUint32(r[recB:], c)
	none := int32(noTenant)
	binary.LittleEndian.PutUint32(r[recTenant:], uint32(none))
	copy(r[recHeader:], s)
	b.x.t.arena = arena
	b.hashes, b.offs = append(b.hashes, h), append(b.offs, o)
	return o
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
	t.arena = append([]byte(nil), t.arena...) // no spare capacity kept
	for j, h := range b.hashes {
		i := h & t.mask
		for t.slots[i] != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = h>>32<<32 | uint64(b.offs[j]+1)
	}
}

// Len returns the number of distinct tenants in x.
func (x *Index) Len() int { return len(x.tenants) }
