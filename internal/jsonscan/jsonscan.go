// Package jsonscan reads JSON objects in place: it hands out their members
// as slices of the input, so that forwarded values (and keys) keep their
// bytes and nothing is decoded that is not needed. It is the gateway's
// zero-allocation path for JSON-RPC envelopes (the edge's request check,
// the worker's params and responses).
//
// Every function expects valid JSON: check it with json.Valid first where
// the answer matters. On other input Members never panics (bytes from the
// bus are not trusted): it stops and reports false at what it cannot read,
// having called fn for the members before it. On duplicate keys fn sees
// each member, in order (encoding/json keeps the last); keys match exactly
// (encoding/json also matches struct fields case-insensitively). [Names]
// and [Scan] find the members a lenient decoder would read in place of the
// exact one, so that a caller can refuse them (package fields).
package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Members calls fn with the raw key (quoted, as written) and the raw
// value of each member of the object data, in order. It reports false when
// data is not an object, or (for invalid JSON) ends inside one or has a
// member that does not start with a string.
func Members(data []byte, fn func(key, val []byte)) bool {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	for {
		if i = skipWS(data, i); i >= len(data) {
			return false
		}
		switch data[i] {
		case '}':
			return true
		case ',':
			i = skipWS(data, i+1)
		}
		if i >= len(data) || data[i] != '"' {
			return false
		}
		k := i
		i = skipString(data, i)
		key := data[k:i]
		i = skipWS(data, i) + 1 // ':'
		if i = skipWS(data, i); i >= len(data) {
			return false
		}
		v := i
		i = skipValue(data, i)
		fn(key, data[v:i])
	}
}

// KeyIs reports whether the raw key (quoted) names s.
func KeyIs(key []byte, s string) bool {
	if len(key) == len(s)+2 && string(key[1:len(key)-1]) == s {
		return true
	}
	return (bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key)) && Unquote(key) == s
}

// Unquote returns the string a raw JSON string denotes (invalid UTF-8
// becomes U+FFFD, as encoding/json decodes it).
func Unquote(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at data[i].
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	// Unterminated: a backslash as the last byte stepped past the end.
	return min(i, len(data))
}

// skipValue returns the index after the value starting at data[i].
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
		i++
	}
	return i
}
