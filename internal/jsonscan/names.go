package jsonscan

import (
	"fmt"
	"math/bits"
	"unicode"
	"unicode/utf8"
)

// Names is a set of up to 64 object member names that a [Scan] looks for.
// Each name is matched exactly (as [KeyIs] does) and, to find members
// that a lenient decoder would take for it, loosely: with letter case
// folded as Unicode simple folding does (what encoding/json matches struct
// fields by: "Name" and "NAME" are "name", and so is "nameK" with a Kelvin
// sign for the K) and with '_' and '-' ignored (what encoding/json/v2's
// case-insensitive matching adds: "task_id" is "taskId"). Names are built
// once, at package initialization; they are immutable and safe for
// concurrent use.
type Names struct {
	list   []string
	folded []string    // fold(list[i]): ASCII, upper case, no '_' or '-'
	first  [128]uint64 // bit i set when folded[i] starts with that byte
}

// NewNames returns the set of names. It panics (a programmer error) for
// more than 64 names, for a name that is empty once folded or whose folded
// form is not ASCII, and for two names that fold alike.
func NewNames(names ...string) *Names {
	if len(names) > 64 {
		panic("jsonscan: more than 64 names")
	}
	n := &Names{list: names, folded: make([]string, len(names))}
	for i, s := range names {
		f := fold(s)
		if f == "" || !ascii(f) {
			panic(fmt.Sprintf("jsonscan: name %q cannot be matched loosely", s))
		}
		for j := range i {
			if n.folded[j] == f {
				panic(fmt.Sprintf("jsonscan: names %q and %q fold alike", names[j], s))
			}
		}
		n.folded[i] = f
		n.first[f[0]] |= 1 << i
	}
	return n
}

// Name returns the i-th name.
func (n *Names) Name(i int) string { return n.list[i] }

// Len returns the number of names.
func (n *Names) Len() int { return len(n.list) }

// Index returns the index of name, exactly; -1 when it is not one of the
// names.
func (n *Names) Index(name string) int {
	for i, s := range n.list {
		if s == name {
			return i
		}
	}
	return -1
}

// Match returns the index of the name that the raw key (quoted, as
// [Members] hands it out) is loosely, and whether it is that name exactly;
// -1 when it is none of them. A key of plain ASCII without escapes (every
// key a client normally sends) is matched in place, without allocating.
func (n *Names) Match(key []byte) (i int, exact bool) {
	if len(key) < 2 {
		return -1, false
	}
	body := key[1 : len(key)-1]
	if ascii(body) {
		// No escapes, no multi-byte runes: the key folds byte by byte.
		j := 0
		for j < len(body) && (body[j] == '_' || body[j] == '-') {
			j++
		}
		if j == len(body) {
			return -1, false
		}
		for cand := n.first[upper(body[j])]; cand != 0; cand &= cand - 1 {
			i := bits.TrailingZeros64(cand)
			if foldsToASCII(body[j:], n.folded[i]) {
				return i, string(body) == n.list[i]
			}
		}
		return -1, false
	}
	s := Unquote(key)
	f := fold(s)
	for i, g := range n.folded {
		if f == g {
			return i, s == n.list[i]
		}
	}
	return -1, false
}

// LooseEqual reports whether the raw key (quoted) is name loosely, as
// [Names] matches (letter case folded, '_' and '-' ignored). It is for
// names known only at run time; it may allocate.
func LooseEqual(key []byte, name string) bool {
	return len(key) >= 2 && fold(Unquote(key)) == fold(name)
}

// Scan follows the member keys of one JSON object for a set of [Names]:
// each name may be given once, exactly as written. A second member that is
// the name loosely (see [Names]) or exactly, or a member that is the name
// loosely but not exactly, is a clash: a decoder that keeps the last of
// duplicate members, or matches names loosely, could read another value
// than the one the gateway read. The zero value is not usable: get one
// from [Names.Scan]. A Scan is used by one goroutine, for one object.
type Scan struct {
	names *Names
	seen  uint64
	clash int // 1 + the index of the first name that clashed; 0: none
}

// Scan starts a scan of one object.
func (n *Names) Scan() Scan { return Scan{names: n} }

// Key notes the raw key of the object's next member and returns the index
// of the name it is: exactly that name, and the first member to be that
// name loosely. It returns -1 for a key that is none of the names, and for
// one that clashes (see [Scan.Clash]).
func (s *Scan) Key(key []byte) int {
	i, exact := s.names.Match(key)
	if i < 0 {
		return -1
	}
	bit := uint64(1) << i
	if s.seen&bit != 0 || !exact {
		if s.clash == 0 {
			s.clash = i + 1
		}
		s.seen |= bit
		return -1
	}
	s.seen |= bit
	return i
}

// Clash returns the first name that clashed, and false when none did.
func (s *Scan) Clash() (string, bool) {
	if s.clash == 0 {
		return "", false
	}
	return s.names.list[s.clash-1], true
}

// fold returns s with '_' and '-' dropped and every rune replaced by the
// smallest rune of its simple case folding orbit (upper case, for ASCII
// letters): fold(a) == fold(b) exactly when strings.EqualFold holds for
// a and b with '_' and '-' taken out.
func fold(s string) string {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r == '_' || r == '-':
			continue
		case r < utf8.RuneSelf:
			out = append(out, upper(byte(r)))
		default:
			out = utf8.AppendRune(out, foldRune(r))
		}
	}
	return string(out)
}

// foldRune returns the smallest rune of r's simple case folding orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// foldsToASCII reports whether the ASCII bytes b fold to f (see fold).
func foldsToASCII(b []byte, f string) bool {
	j := 0
	for _, c := range b {
		if c == '_' || c == '-' {
			continue
		}
		if j == len(f) || upper(c) != f[j] {
			return false
		}
		j++
	}
	return j == len(f)
}

// ascii reports whether b is printable-range ASCII with no backslash or
// quote: bytes that stand for themselves inside a JSON string.
func ascii[T string | []byte](b T) bool {
	for i := 0; i < len(b); i++ {
		if c := b[i]; c >= utf8.RuneSelf || c == '\\' || c == '"' || c < 0x20 {
			return false
		}
	}
	return true
}
