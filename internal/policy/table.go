package policy

import (
	"hash/maphash"
	"math/bits"
)

// table is an immutable open-addressing hash table from string to a small
// value, built once. It exists because a decision is one lookup and a
// map[string]bool lookup costs more than the 15 ns budget: its generic,
// non-inlined hashing dominates. Here a name of up to 16 bytes is hashed
// with two multiplies. The seeds are random per table, so names chosen
// by an upstream cannot be made to collide without knowing them.
type table struct {
	seedA, seedB uint64
	mask         uint64
	slots        []slot
}

// slot is one entry. For keys of up to 16 bytes, a and b hold all their
// bytes (as hashed), so a probe compares two words instead of calling
// into the runtime to compare strings.
type slot struct {
	key  string
	a, b uint64
	val  uint8 // 0: empty
}

// newTable returns a table sized for n keys at a load factor of at most
// one half.
func newTable(n int) table {
	size := 8
	for size < 2*n {
		size *= 2
	}
	var h maphash.Hash
	a := h.Sum64()
	h.WriteByte(1)
	return table{seedA: a, seedB: h.Sum64(), mask: uint64(size - 1), slots: make([]slot, size)}
}

// put stores val (non-zero) under key unless key is present, and reports
// whether it stored it.
func (t *table) put(key string, val uint8) bool {
	h, a, b := t.hash(key)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.val == 0 {
			*s = slot{key: key, a: a, b: b, val: val}
			return true
		}
		if s.equal(key, a, b) {
			return false
		}
	}
}

// get returns the value under key, or 0.
func (t *table) get(key string) uint8 {
	if len(t.slots) == 0 {
		return 0
	}
	h, a, b := t.hash(key)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.val == 0 || s.equal(key, a, b) {
			return s.val
		}
	}
}

// equal reports whether s holds key, whose last hashed words are a and b.
func (s *slot) equal(key string, a, b uint64) bool {
	if s.a != a || s.b != b || len(s.key) != len(key) {
		return false
	}
	return len(key) <= 16 || s.key == key
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// hash is a wyhash-style hash of s: every 16 bytes go through one
// multiply, and the last 16 (or fewer) through a final one. It also
// returns those last words, a and b: with the length they are all of a
// key of up to 16 bytes.
func (t *table) hash(s string) (h, a, b uint64) {
	n := len(s)
	h = t.seedB ^ uint64(n)
	switch {
	case n > 16:
		for p := s; len(p) > 16; p = p[16:] {
			h = mix(le64(p)^t.seedA, le64(p[8:])^h)
		}
		a, b = le64(s[n-16:]), le64(s[n-8:])
	case n >= 8:
		a, b = le64(s), le64(s[n-8:])
	case n >= 4:
		a, b = le32(s), le32(s[n-4:])
	case n > 0:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	return mix(a^t.seedA, b^h), a, b
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}
