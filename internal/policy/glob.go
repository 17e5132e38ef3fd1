package policy

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// glob is a compiled pattern: chunks of literal text and '?' separated by
// stars. Matching is anchored at both ends, walks the subject once per
// chunk in the common cases, and allocates nothing.
//
// A chunk is a list of literal strings with exactly one '?' between
// consecutive ones, so "a?b??" is {"a", "b", "", ""}. Every token of a
// chunk consumes a fixed number of runes, so the end of a chunk's match
// grows with its start: the leftmost match of each middle chunk is the
// best one, and no backtracking is needed.
type glob struct {
	op     globOp
	lit    string     // the literal of opExact, opPrefix, opSuffix and opContains
	chunks [][]string // chunks[0] before the first star, the last after the last star
}

// globOp is a pattern's shape. The common shapes of tool policies get a
// direct test, so that a rule costs a comparison or one strings.Index.
type globOp uint8

const (
	opGeneral  globOp = iota
	opAll             // "*"
	opExact           // "lit"
	opPrefix          // "lit*"
	opSuffix          // "*lit"
	opContains        // "*lit*"
	opNoStar          // wildcards, but no star: "a?c"
)

// compileGlob parses pattern. The syntax is documented on [Rule].
func compileGlob(pattern string) (glob, error) {
	if !utf8.ValidString(pattern) {
		return glob{}, errors.New("not valid UTF-8")
	}
	var (
		chunks [][]string
		cur    []string
		lit    strings.Builder
	)
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			cur = append(cur, lit.String())
			lit.Reset()
			chunks = append(chunks, cur)
			cur = nil
			for i+1 < len(pattern) && pattern[i+1] == '*' {
				i++ // "**" is "*"
			}
		case '?':
			cur = append(cur, lit.String())
			lit.Reset()
		case '\\':
			if i+1 == len(pattern) {
				return glob{}, errors.New("trailing backslash")
			}
			_, w := utf8.DecodeRuneInString(pattern[i+1:])
			lit.WriteString(pattern[i+1 : i+1+w])
			i += w
		default:
			lit.WriteByte(c)
		}
	}
	cur = append(cur, lit.String())
	chunks = append(chunks, cur)
	g := glob{chunks: chunks}
	isLit := func(c []string) bool { return len(c) == 1 }
	empty := func(c []string) bool { return isLit(c) && c[0] == "" }
	switch first, last := chunks[0], chunks[len(chunks)-1]; {
	case len(chunks) == 1 && isLit(first):
		g.op, g.lit = opExact, first[0]
	case len(chunks) == 1:
		g.op = opNoStar
	case len(chunks) == 2 && empty(first) && empty(last):
		g.op = opAll
	case len(chunks) == 2 && isLit(first) && empty(last):
		g.op, g.lit = opPrefix, first[0]
	case len(chunks) == 2 && empty(first) && isLit(last):
		g.op, g.lit = opSuffix, last[0]
	case len(chunks) == 3 && empty(first) && isLit(chunks[1]) && empty(last):
		g.op, g.lit = opContains, chunks[1][0]
	}
	return g, nil
}

// match reports whether g matches all of s.
func (g *glob) match(s string) bool {
	switch g.op {
	case opAll:
		return true
	case opExact:
		return s == g.lit
	case opPrefix:
		return strings.HasPrefix(s, g.lit)
	case opSuffix:
		return strings.HasSuffix(s, g.lit)
	case opContains:
		return strings.Contains(s, g.lit)
	case opNoStar:
		end, ok := matchAt(g.chunks[0], s, 0)
		return ok && end == len(s)
	}
	pos, ok := matchAt(g.chunks[0], s, 0)
	if !ok {
		return false
	}
	last := len(g.chunks) - 1
	for _, c := range g.chunks[1:last] {
		if pos, ok = find(c, s, pos); !ok {
			return false
		}
	}
	return matchEnd(g.chunks[last], s, pos)
}

// matchAt matches chunk c at s[i:] and returns where the match ends.
func matchAt(c []string, s string, i int) (int, bool) {
	if !strings.HasPrefix(s[i:], c[0]) {
		return 0, false
	}
	i += len(c[0])
	for _, l := range c[1:] {
		if i >= len(s) {
			return 0, false
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
		if !strings.HasPrefix(s[i:], l) {
			return 0, false
		}
		i += len(l)
	}
	return i, true
}

// find returns the end of the leftmost match of chunk c starting at or
// after from (a rune boundary). Literals are valid UTF-8, so a literal
// found by strings.Index starts on a rune boundary of s.
func find(c []string, s string, from int) (int, bool) {
	if len(c) == 1 {
		j := strings.Index(s[from:], c[0])
		if j < 0 {
			return 0, false
		}
		return from + j + len(c[0]), true
	}
	for i := from; i <= len(s); {
		if c[0] != "" {
			j := strings.Index(s[i:], c[0])
			if j < 0 {
				return 0, false
			}
			i += j
		}
		if end, ok := matchAt(c, s, i); ok {
			return end, true
		}
		if i == len(s) {
			break
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return 0, false
}

// matchEnd reports whether chunk c matches a suffix of s that starts at or
// after from.
func matchEnd(c []string, s string, from int) bool {
	if len(c) == 1 {
		return len(s)-len(c[0]) >= from && strings.HasSuffix(s, c[0])
	}
	// The match's end grows with its start, so scan starts left to right
	// until one ends exactly at len(s) or they run past it.
	for i := from; i <= len(s); {
		if c[0] != "" {
			j := strings.Index(s[i:], c[0])
			if j < 0 {
				return false
			}
			i += j
		}
		end, ok := matchAt(c, s, i)
		if ok && end == len(s) {
			return true
		}
		if i == len(s) {
			break
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return false
}
