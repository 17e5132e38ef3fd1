// Package names maps (upstream, tool) pairs to the federated names clients
// see, and back.
//
// A federated name is <upstream><sep><tool> when that is valid for clients
// that accept only ^[A-Za-z0-9_-]{1,64}$ and no other pair produces it.
// Otherwise the pair gets a short form: a sanitized, truncated prefix plus
// "-" and 8 hex digits of an FNV-64a hash of the pair. The assignment is a
// pure function of the set of pairs, so every router replica computes the
// same names from the same catalog; collisions (between direct names, or a
// short form and any other name) are detected and resolved deterministically.
package names

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"
)

// MaxLen is the longest name accepted by strict clients.
const MaxLen = 64

// Pair is one tool of one upstream.
type Pair struct {
	Upstream, Tool string
}

// Valid reports whether s matches ^[A-Za-z0-9_-]{1,64}$.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !validByte(s[i]) {
			return false
		}
	}
	return true
}

func validByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// Assign returns the federated name of every pair. pairs may be in any
// order and must not contain duplicates.
func Assign(pairs []Pair, sep string) map[Pair]string {
	sorted := slices.Clone(pairs)
	slices.SortFunc(sorted, func(a, b Pair) int {
		return cmp.Or(cmp.Compare(a.Upstream, b.Upstream), cmp.Compare(a.Tool, b.Tool))
	})
	out := make(map[Pair]string, len(pairs))
	count := make(map[string]int, len(pairs))
	for _, p := range sorted {
		count[p.Upstream+sep+p.Tool]++
	}
	taken := make(map[string]bool, len(pairs))
	var short []Pair
	for _, p := range sorted {
		n := p.Upstream + sep + p.Tool
		if Valid(n) && count[n] == 1 {
			out[p] = n
			taken[n] = true
		} else {
			short = append(short, p)
		}
	}
	for _, p := range short {
		for k := 0; ; k++ {
			n := shortForm(p, sep, k)
			if !taken[n] {
				out[p] = n
				taken[n] = true
				break
			}
		}
	}
	return out
}

// shortForm is <upstream><sep><sanitized tool>, cut to fit, + "-" + hash.
func shortForm(p Pair, sep string, k int) string {
	h := fnv.New64a()
	h.Write([]byte(p.Upstream))
	h.Write([]byte{0})
	h.Write([]byte(p.Tool))
	if k > 0 {
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(k)))
	}
	sum := strconv.FormatUint(h.Sum64(), 16)
	for len(sum) < 16 {
		sum = "0" + sum
	}
	suffix := "-" + sum[:8]
	b := make([]byte, 0, MaxLen)
	for _, c := range []byte(p.Upstream + sep + p.Tool) {
		if len(b) == MaxLen-len(suffix) {
			break
		}
		if !validByte(c) {
			c = '_'
		}
		b = append(b, c)
	}
	return string(append(b, suffix...))
}
