package tenant

import (
	"hash/maphash"
	"math/bits"
)

// filter is a Bloom filter over every claim value and group some selector
// names. Most of a principal's values match no selector; the filter turns
// them away after one hash of the string and one word read from a few
// kilobytes, where a map lookup would hash a compound key and miss in a
// table as large as the tenant count. Its answer "maybe" is settled by the
// maps.
//
// It is blocked: both bits of a string sit in one 64-bit word, so a test
// touches one cache line.
type filter struct {
	seed  maphash.Seed
	words []uint64
	mask  uint64 // len(words) - 1; len(words) is a power of two
}

// bitsPerString keeps false positives near 2% with two bits in one word.
const bitsPerString = 16

func newFilter(n int) filter {
	words := uint64(1)
	if want := uint64(n) * bitsPerString / 64; want > words {
		words = 1 << bits.Len64(want-1)
	}
	return filter{seed: maphash.MakeSeed(), words: make([]uint64, words), mask: words - 1}
}

// probe returns the word for s and the two bits of s in it.
func (f *filter) probe(s string) (*uint64, uint64) {
	h := maphash.String(f.seed, s)
	return &f.words[h&f.mask], 1<<(h>>52&63) | 1<<(h>>58)
}

func (f *filter) add(s string) {
	w, b := f.probe(s)
	*w |= b
}

func (f *filter) mayHave(s string) bool {
	if len(f.words) == 0 { // the zero Index
		return false
	}
	w, b := f.probe(s)
	return *w&b == b
}
