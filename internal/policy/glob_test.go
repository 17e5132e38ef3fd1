package policy

import (
	"path"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPolicyGlob(t *testing.T) {
	cases := []struct {
		name, pattern, subject string
		want                   bool
	}{
		{"empty matches empty", "", "", true},
		{"empty matches nothing else", "", "a", false},
		{"exact", "github__create_issue", "github__create_issue", true},
		{"exact is anchored", "github__create", "github__create_issue", false},
		{"exact is case-sensitive", "GitHub__x", "github__x", false},
		{"star alone", "*", "", true},
		{"star anything", "*", "anything/at all", true},
		{"double star is star", "**", "a/b/c", true},
		{"prefix", "github__*", "github__create_issue", true},
		{"prefix other upstream", "github__*", "gitlab__create_issue", false},
		{"prefix needs separator", "github__*", "github", false},
		{"suffix", "*__delete_*", "jira__delete_ticket", true},
		{"infix no match", "*__delete_*", "jira__undelete", false},
		{"star crosses slash", "file:///secret/*", "file:///secret/a/b/c.txt", true},
		{"double star crosses slash", "file:///**/x", "file:///a/b/x", true},
		{"star empty run", "a*b", "ab", true},
		{"overlapping prefix and suffix", "ab*ba", "aba", false},
		{"prefix and suffix meet", "ab*ba", "abba", true},
		{"many stars", "*a*b*c*", "xxaxxbxxcxx", true},
		{"many stars out of order", "*a*b*c*", "cba", false},
		{"middle chunk leftmost", "*ab*b", "aabab", true},
		{"question one char", "a?c", "abc", true},
		{"question not zero", "a?c", "ac", false},
		{"question not two", "a?c", "abbc", false},
		{"question matches slash", "a?c", "a/c", true},
		{"question is one rune", "a?c", "aéc", true},
		{"question not one byte of a rune", "a??c", "aéc", false},
		{"question on invalid byte", "a?c", "a\xffc", true},
		{"question after star at end", "*?", "é", true},
		{"question chunk in middle", "*a?c*", "xxabcxx", true},
		{"question chunk at end", "*a?", "bab", true},
		{"question chunk at end, backtrack", "*a?c", "aacxabc", true},
		{"question chunk at end, miss", "*a?c", "aacxab", false},
		{"unicode literal", "工具__*", "工具__検索", true},
		{"unicode mismatch", "工具__*", "工__検索", false},
		{"escaped star", `a\*b`, "a*b", true},
		{"escaped star literal", `a\*b`, "axb", false},
		{"escaped question", `a\?`, "a?", true},
		{"escaped question literal", `a\?`, "ab", false},
		{"escaped backslash", `a\\*`, `a\bc`, true},
		{"escaped rune", `\é*`, "été", true},
		{"bracket is literal", "[ab]", "[ab]", true},
		{"bracket no class", "[ab]", "a", false},
		{"brace is literal", "file:///{path}", "file:///{path}", true},
		{"star then question", "*?*", "", false},
		{"star then question, one", "*?*", "x", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := compileGlob(tc.pattern)
			if err != nil {
				t.Fatalf("compileGlob(%q): %v", tc.pattern, err)
			}
			if got := g.match(tc.subject); got != tc.want {
				t.Errorf("match(%q, %q) = %v, want %v", tc.pattern, tc.subject, got, tc.want)
			}
			if ref := globRegexp(tc.pattern).MatchString(tc.subject); ref != tc.want {
				t.Errorf("reference(%q, %q) = %v, want %v", tc.pattern, tc.subject, ref, tc.want)
			}
		})
	}
}

func TestPolicyGlobErrors(t *testing.T) {
	for _, p := range []string{`a\`, `\`, "a\xffb"} {
		if _, err := compileGlob(p); err == nil {
			t.Errorf("compileGlob(%q) accepted a bad pattern", p)
		}
	}
}

// badPattern reports whether pattern is invalid UTF-8 or ends in an
// unpaired backslash.
func badPattern(pattern string) bool {
	if !utf8.ValidString(pattern) {
		return true
	}
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '\\' {
			if i+1 == len(pattern) {
				return true
			}
			i++
		}
	}
	return false
}

// globRegexp translates a valid pattern into the reference regexp: '*' is
// (?s:.*), '?' is (?s:.), everything else literal.
func globRegexp(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`\A(?s:`)
	for i := 0; i < len(pattern); {
		r, w := utf8.DecodeRuneInString(pattern[i:])
		i += w
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '\\':
			r, w = utf8.DecodeRuneInString(pattern[i:])
			i += w
			b.WriteString(regexp.QuoteMeta(string(r)))
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`)\z`)
	return regexp.MustCompile(b.String())
}

// FuzzPolicyGlob checks the matcher against two references: the regexp
// translation always (except where regexp reads an invalid subject byte
// as U+FFFD and a literal U+FFFD in the pattern would match it), and
// path.Match where its syntax and ours agree: no '/' anywhere, no '['
// classes, and ASCII subjects (after a star path.Match also tries starts
// inside a multi-byte rune, so "*??" matches one 4-byte rune there).
func FuzzPolicyGlob(f *testing.F) {
	seeds := [][2]string{
		{"github__*", "github__create_issue"},
		{"*__delete_*", "jira__delete_ticket"},
		{"file:///secret/*", "file:///secret/a/b"},
		{"*a?c", "aacxabc"},
		{"a??c", "aéc"},
		{"*?*", ""},
		{`a\*b`, "a*b"},
		{`\é*`, "été"},
		{"**x*", "xx"},
		{"a?c", "a\xffc"},
		{"", ""},
		{"*??", "\U000afd83"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, subject string) {
		g, err := compileGlob(pattern)
		if (err != nil) != badPattern(pattern) {
			t.Fatalf("compileGlob(%q): %v", pattern, err)
		}
		if err != nil {
			return
		}
		got := g.match(subject)
		if utf8.ValidString(subject) || !strings.ContainsRune(pattern, utf8.RuneError) {
			if want := globRegexp(pattern).MatchString(subject); got != want {
				t.Fatalf("match(%q, %q) = %v, regexp says %v", pattern, subject, got, want)
			}
		}
		if isASCII(subject) && !strings.ContainsAny(pattern+subject, "/[") {
			want, err := path.Match(pattern, subject)
			if err != nil {
				t.Fatalf("path.Match(%q): %v, but compileGlob accepted it", pattern, err)
			}
			if got != want {
				t.Fatalf("match(%q, %q) = %v, path.Match says %v", pattern, subject, got, want)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func TestPolicyGlobShapes(t *testing.T) {
	for pattern, want := range map[string]globOp{
		"*": opAll, "***": opAll, "abc": opExact, `a\*`: opExact, "": opExact,
		"ab*": opPrefix, "ab**": opPrefix, "*ab": opSuffix, "*ab*": opContains, "**ab**": opContains,
		"a?c": opNoStar, "?": opNoStar, "a*b": opGeneral, "*a*b*": opGeneral, "*a?*": opGeneral, "a?*": opGeneral,
	} {
		g, err := compileGlob(pattern)
		if err != nil || g.op != want {
			t.Errorf("compileGlob(%q): op %d, %v; want op %d", pattern, g.op, err, want)
		}
	}
}
