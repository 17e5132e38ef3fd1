package tenant

import "hash/maphash"

// table is the open-addressing hash table behind an [Index]. Every key a
// selector names (a claim value under its name, a group, an issuer, and the
// pairs that make up compound selectors) is one record. Records are
// entries of one cache line each, in slot order: the record of slot i is
// entry i of arena. tags holds one byte of each slot's hash (0 if the slot
// is empty); lookups probe tags linearly from the slot the low bits of the
// hash pick.
//
// A principal's strings are hashed once each, and that hash both picks
// the slot and (through the tag) turns away almost every key no selector
// names: a miss reads one line of tags, which are 1/64 of the table and so
// stay in cache; a hit reads one more line, the entry, which holds the key
// to compare and the tenant's name. Because the entry's address follows
// from the slot, not from something read from memory, the CPU fetches it
// while it compares the tag, so a hit waits for one cache miss, not two. A
// Go map would hash the key again and chase pointers to the key's strings.
// (Entries start on cache lines because the allocator places blocks of 512
// bytes and more at multiples of 64 bytes; smaller tables fit in L1.)
//
// Entries cost memory: 64 bytes per slot, slots at most 4/3 the records
// (maxLoad), 16,384 entries (1 MiB) for 10,000 tenants of one selector.
//
// The hash is seeded per table ([maphash.MakeSeed]): principals choose
// their claim values and groups, and must not be able to pick strings that
// share a slot and make every lookup probe far.
type table struct {
	seed  maphash.Seed
	tags  []uint8 // by slot: 0 is empty, else tagOf(hash); len is a power of two
	mask  uint64  // len(tags) - 1
	arena string  // len(tags) entries of entrySize bytes, then spilled strings
}

// Record kinds. A record's key is its kind plus, for string kinds, the
// claim name index and the string, and for pair kinds the slots of the two
// records it pairs.
const (
	kindClaim    uint8 = iota + 1 // claim name index, value
	kindGroup                     // group
	kindIssuer                    // issuer of some compound selector
	kindPrefix                    // issuer record, claim record: begins a compound selector
	kindCompound                  // prefix record, group record
)

// Entry layout, little-endian. The key's string and the name of the
// record's tenant (empty if it has no tenant or an ambiguous one) are
// stored in the entry when they fit, one after the other, or else after
// the entries; recKey and recName locate them in the arena either way.
const (
	recKind   = 0  // uint8
	recFlags  = 1  // uint8
	recTenant = 4  // int32: tenant id, ambiguous or noTenant
	recA      = 8  // uint32: claim name index, or first slot of a pair
	recB      = 12 // uint32: string length, or second slot of a pair
	recKey    = 16 // uint32: offset of the string in the arena
	recName   = 20 // uint32: offset of the tenant's name in the arena
	recNameN  = 24 // uint32: length of the tenant's name
	recInline = 28 // the string and the name, when they fit
	entrySize = 64 // one cache line
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

// maxArena keeps every offset within the 32 bits an entry gives it.
const maxArena = 1<<32 - 1

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

// tagOf is the tag of hash h: its top byte, which the slot (its low bits)
// does not use, made non-zero.
func tagOf(h uint64) uint8 {
	if g := uint8(h >> 56); g != 0 {
		return g
	}
	return 1
}

// stringHash is the hash of a string record's key from the hash of its
// string h. Adding a multiple of an odd constant that depends only on the
// kind and name keeps h uniform (one multiply, off the path that waits for
// h) and sends the same string under different names to unrelated slots.
func stringHash(h uint64, kind uint8, name uint32) uint64 {
	return h + (uint64(kind)<<32|uint64(name))*0x9e3779b97f4a7c15
}

// pairHash is the hash of a pair record's key. Slots are unique across
// kinds, so the kind need not be hashed.
func pairHash(a, b uint32) uint64 { return fin(uint64(a)<<32 | uint64(b)) }

// findString returns the slot of the record of kind with name and s, whose
// hash is h, or notFound.
func (t *table) findString(h uint64, kind uint8, name uint32, s string) int {
	tag := tagOf(h)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		g := t.tags[i]
		if g == 0 {
			return notFound
		}
		if g != tag {
			continue
		}
		o := int(i) * entrySize
		r := t.arena[o : o+entrySize]
		if r[recKind] == kind && u32(r, recA) == name && int(u32(r, recB)) == len(s) {
			if k := int(u32(r, recKey)); t.arena[k:k+len(s)] == s {
				return int(i)
			}
		}
	}
}

// findPair returns the slot of the pair record of kind for slots a and b,
// or notFound.
func (t *table) findPair(kind uint8, a, b uint32) int {
	h := pairHash(a, b)
	tag := tagOf(h)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		g := t.tags[i]
		if g == 0 {
			return notFound
		}
		if g != tag {
			continue
		}
		o := int(i) * entrySize
		r := t.arena[o : o+entrySize]
		if r[recKind] == kind && u32(r, recA) == a && u32(r, recB) == b {
			return int(i)
		}
	}
}

// u32 reads the little-endian uint32 at r[i:].
func u32(r string, i int) uint32 {
	_ = r[i+3] // one bounds check
	return uint32(r[i]) | uint32(r[i+1])<<8 | uint32(r[i+2])<<16 | uint32(r[i+3])<<24
}

func (t *table) tenant(i int) int32 { return int32(u32(t.arena, i*entrySize+recTenant)) }

// name returns the tenant name of the record in slot i.
func (t *table) name(i int) string {
	n := int(u32(t.arena, i*entrySize+recName))
	return t.arena[n : n+int(u32(t.arena, i*entrySize+recNameN))]
}

func (t *table) flags(i int) uint8 { return t.arena[i*entrySize+recFlags] }
