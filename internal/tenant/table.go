package tenant

import "hash/maphash"

// table is the open-addressing hash table behind an [Index]. Every key a
// selector names (a claim value under its name, a group, an issuer, and the
// pairs that make up compound selectors) is one record in arena; slots
// holds, per record, the top 32 bits of the key's hash and the record's
// offset, probed linearly from the slot the low bits of the hash pick.
//
// A principal's strings are hashed once each, and that hash both picks
// the slot and (through the tag) turns away almost every key no selector
// names: a miss reads one line of slots; a hit reads one more, the record,
// whose header, string and tenant name share a line. A Go map would hash
// the key again and chase pointers to the key's strings.
type table struct {
	seed  maphash.Seed
	slots []uint64 // tag<<32 | offset+1; 0 is empty; len is a power of two
	mask  uint64   // len(slots) - 1
	arena string   // records, see rec*; a string so that names are substrings
}

// Record kinds. A record's key is its kind plus, for string kinds, the
// claim name index and the string, and for pair kinds the offsets of the
// two records it pairs.
const (
	kindClaim    uint8 = iota + 1 // claim name index, value
	kindGroup                     // group
	kindIssuer                    // issuer of some compound selector
	kindPrefix                    // issuer record, claim record: begins a compound selector
	kindCompound                  // prefix record, group record
)

// Record layout in the arena, little-endian. The key's string and then
// the name of the record's tenant (none if it has no tenant or an
// ambiguous one) follow the header, so that a hit reads the tenant's name
// from the line it has just compared, not from another.
const (
	recKind   = 0  // uint8
	recFlags  = 1  // uint8
	recA      = 4  // uint32: claim name index, or first offset of a pair
	recB      = 8  // uint32: string length, or second offset of a pair
	recTenant = 12 // int32: tenant id, ambiguous or noTenant
	recNameN  = 16 // uint32: length of the tenant's name
	recHeader = 20 // the string follows, then the name
)

// flagCompound marks a claim record that some compound selector names, so
// that only those claim values are looked up as a compound prefix.
const flagCompound uint8 = 1

// noTenant is the tenant of a record no selector of its own shape names: a
// group or claim value that only compound selectors list, an issuer, a
// prefix.
const noTenant = -2

// notFound is what the find methods return for a key no record has.
const notFound = -1

// maxArena keeps offset+1 within the 32 bits a slot gives it.
const maxArena = 1<<32 - 2

// fin is the splitmix64 finalizer: a bijection that spreads every input
// bit over the output, so distinct pair keys never share a hash.
func fin(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	return z ^ z>>31
}

func (t *table) hashString(s string) uint64 { return maphash.String(t.seed, s) }

// stringHash is the hash of a string record's key from the hash of its
// string h. Adding a multiple of an odd constant that depends only on the
// kind and name keeps h uniform (one multiply, off the path that waits for
// h) and sends the same string under different names to unrelated slots.
func stringHash(h uint64, kind uint8, name uint32) uint64 {
	return h + (uint64(kind)<<32|uint64(name))*0x9e3779b97f4a7c15
}

// pairHash is the hash of a pair record's key. Offsets are unique across
// kinds, so the kind need not be hashed.
func pairHash(a, b uint32) uint64 { return fin(uint64(a)<<32 | uint64(b)) }

// findString returns the offset of the record of kind with name and s,
// whose hash is h, or notFound.
func (t *table) findString(h uint64, kind uint8, name uint32, s string) int {
	tag := h >> 32
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		slot := t.slots[i]
		if slot == 0 {
			return notFound
		}
		if slot>>32 != tag {
			continue
		}
		o := int(uint32(slot)) - 1
		r := t.arena[o : o+recHeader]
		if r[recKind] == kind && u32(r, recA) == name && int(u32(r, recB)) == len(s) &&
			t.arena[o+recHeader:o+recHeader+len(s)] == s {
			return o
		}
	}
}

// findPair returns the offset of the pair record of kind for a and b, or
// notFound.
func (t *table) findPair(kind uint8, a, b uint32) int {
	h := pairHash(a, b)
	tag := h >> 32
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		slot := t.slots[i]
		if slot == 0 {
			return notFound
		}
		if slot>>32 != tag {
			continue
		}
		o := int(uint32(slot)) - 1
		r := t.arena[o : o+recHeader]
		if r[recKind] == kind && u32(r, recA) == a && u32(r, recB) == b {
			return o
		}
	}
}

// u32 reads the little-endian uint32 at r[i:].
func u32(r string, i int) uint32 {
	_ = r[i+3] // one bounds check
	return uint32(r[i]) | uint32(r[i+1])<<8 | uint32(r[i+2])<<16 | uint32(r[i+3])<<24
}

func (t *table) tenant(o int) int32 { return int32(u32(t.arena, o+recTenant)) }

// name returns the tenant name of record o, which follows its string.
func (t *table) name(o int) string {
	i := o + recHeader
	if k := t.arena[o+recKind]; k == kindClaim || k == kindGroup || k == kindIssuer {
		i += int(u32(t.arena, o+recB))
	}
	return t.arena[i : i+int(u32(t.arena, o+recNameN))]
}

func (t *table) flags(o int) uint8 { return t.arena[o+recFlags] }
