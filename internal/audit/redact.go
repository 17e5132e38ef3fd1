package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Redacted replaces every redacted or scrubbed value.
const Redacted = "[REDACTED]"

// Redactor removes configured fields and secrets from an event's
// arguments and result. Build it with [NewRedactor]; it is immutable and
// safe for concurrent use.
//
// A path names fields from the root of the arguments ("arguments.") or of
// the result ("result."). Segments are object keys separated by dots;
// "*" matches any key of an object or any element of an array; "[*]"
// after a key matches every element of the array under it and "[N]" the
// element N; "**" matches any number (zero or more) of levels. Examples:
//
//	arguments.password
//	arguments.*.token              (token under any argument)
//	result.content[*].text
//	result.structuredContent.**.ssn (ssn at any depth under it)
//
// A matched value, whatever its type, becomes the string "[REDACTED]".
// After the paths, every string value and object key is scrubbed of
// secret shapes ([ScrubString]), and the value of any key that names a
// credential (authorization, api_key, access_token, password, ...; see
// [SecretKey]) is redacted.
type Redactor struct {
	args, result []pathSeg // roots of the path tries; nil: no paths
}

// pathSeg is one compiled path: its segments from the root.
type pathSeg struct {
	segs []seg
}

type seg struct {
	key   string // object key; "" with any or deep
	index int    // array index when isIndex
	any   bool   // "*" or "[*]"
	deep  bool   // "**"
	isIdx bool
}

// ErrBadPath is returned by NewRedactor for a path it cannot parse.
var ErrBadPath = errors.New("audit: bad redact path")

// NewRedactor compiles paths (see [Redactor]). It reports every bad path,
// joined, each wrapping ErrBadPath.
func NewRedactor(paths []string) (*Redactor, error) {
	r := &Redactor{}
	var errs []error
	for _, p := range paths {
		root, rest, _ := strings.Cut(p, ".")
		segs, err := parsePath(rest)
		if err == nil && rest == "" {
			err = errors.New("no field after the root")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%w %q: %v", ErrBadPath, p, err))
			continue
		}
		switch root {
		case "arguments":
			r.args = append(r.args, pathSeg{segs})
		case "result":
			r.result = append(r.result, pathSeg{segs})
		default:
			errs = append(errs, fmt.Errorf("%w %q: must start with arguments. or result.", ErrBadPath, p))
		}
	}
	return r, errors.Join(errs...)
}

func parsePath(p string) ([]seg, error) {
	var out []seg
	for part := range strings.SplitSeq(p, ".") {
		key, idx, hasIdx := strings.Cut(part, "[")
		switch {
		case key == "" && !hasIdx:
			return nil, errors.New("empty segment")
		case key == "**":
			out = append(out, seg{deep: true})
		case key == "*":
			out = append(out, seg{any: true})
		case key != "":
			out = append(out, seg{key: key})
		}
		for hasIdx {
			var rest string
			var ok bool
			idx, rest, ok = strings.Cut(idx, "]")
			if !ok {
				return nil, errors.New("unclosed [")
			}
			if idx == "*" {
				out = append(out, seg{any: true})
			} else {
				n, err := strconv.Atoi(idx)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("bad index %q", idx)
				}
				out = append(out, seg{index: n, isIdx: true})
			}
			switch {
			case rest == "":
				hasIdx = false
			case rest[0] == '[':
				idx = rest[1:]
			default:
				return nil, fmt.Errorf("unexpected %q after ]", rest)
			}
		}
	}
	return out, nil
}

// maxJSONDepth bounds the nesting Redact walks; deeper documents are
// replaced whole (encoding/json itself stops at 10000).
const maxJSONDepth = 64

// RedactArguments returns raw (a JSON value) with the argument paths and
// the secrets removed, as compact JSON. Input that is not valid JSON, or
// nested deeper than 64 levels, comes back as the JSON string
// "[REDACTED]": what cannot be inspected is not recorded.
func (r *Redactor) RedactArguments(raw []byte) []byte { return r.redact(raw, r.args) }

// RedactResult is RedactArguments for a result, with the result paths.
func (r *Redactor) RedactResult(raw []byte) []byte { return r.redact(raw, r.result) }

var redactedJSON = []byte(`"` + Redacted + `"`)

func (r *Redactor) redact(raw []byte, paths []pathSeg) []byte {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return redactedJSON
	}
	if depth(v, 0) > maxJSONDepth {
		return redactedJSON
	}
	for _, p := range paths {
		v = apply(v, p.segs)
	}
	v = scrubValue(v)
	out, err := json.Marshal(v)
	if err != nil {
		return redactedJSON
	}
	return out
}

func depth(v any, d int) int {
	if d > maxJSONDepth {
		return d
	}
	m := d
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			m = max(m, depth(e, d+1))
		}
	case []any:
		for _, e := range x {
			m = max(m, depth(e, d+1))
		}
	}
	return m
}

// apply redacts what segs matches under v and returns v (or the
// replacement when segs is empty: v itself is matched).
func apply(v any, segs []seg) any {
	if len(segs) == 0 {
		return Redacted
	}
	s, rest := segs[0], segs[1:]
	switch {
	case s.deep:
		// ** matches zero levels (rest applies here) or more (recurse).
		v = apply(v, rest)
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = apply(e, segs)
			}
		case []any:
			for i, e := range x {
				x[i] = apply(e, segs)
			}
		}
		return v
	case s.any:
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = apply(e, rest)
			}
		case []any:
			for i, e := range x {
				x[i] = apply(e, rest)
			}
		}
	case s.isIdx:
		if x, ok := v.([]any); ok && s.index < len(x) {
			x[s.index] = apply(x[s.index], rest)
		}
	default:
		if x, ok := v.(map[string]any); ok {
			if e, ok := x[s.key]; ok {
				x[s.key] = apply(e, rest)
			}
		}
	}
	return v
}

// scrubValue scrubs every string and key under v and redacts the values
// of credential keys.
func scrubValue(v any) any {
	switch x := v.(type) {
	case string:
		return ScrubString(x)
	case map[string]any:
		for k, e := range x {
			nk := ScrubString(k)
			if nk != k {
				delete(x, k)
			}
			if SecretKey(k) {
				x[nk] = Redacted
				continue
			}
			x[nk] = scrubValue(e)
		}
	case []any:
		for i, e := range x {
			x[i] = scrubValue(e)
		}
	}
	return v
}

// secretKeys are object keys (compared case-insensitively, with '-' and
// '_' ignored) whose values are credentials.
var secretKeys = map[string]bool{
	"authorization": true, "proxyauthorization": true, "cookie": true, "setcookie": true,
	"passwd": true, "secret": true, "token": true, "bearer": true, "sig": true, "signature": true,
}

// secretSuffixes end the keys of credentials whatever their prefix
// ("github_token", "OPENAI_API_KEY", "aws_secret", "db-password"): a
// false positive costs a redacted value, a miss a leaked secret.
var secretSuffixes = []string{"token", "secret", "password", "passwd", "apikey", "privatekey", "credential", "credentials", "authorization", "cookie"}

// SecretKey reports whether an object key names a credential
// ("Authorization", "api_key", "X-Api-Key", "access_token", "password",
// "client_secret", "token", "cookie", "github_token", ...): one of
// secretKeys, or a key ending in one of secretSuffixes.
func SecretKey(k string) bool {
	if len(k) > 64 {
		return false
	}
	var b [64]byte
	n := 0
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '-' || c == '_':
			continue
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		}
		b[n] = c
		n++
	}
	key := b[:n]
	if secretKeys[string(key)] {
		return true
	}
	for _, suf := range secretSuffixes {
		if bytes.HasSuffix(key, []byte(suf)) {
			return true
		}
	}
	return false
}

// Secret shapes. syk_ keys are Switchyard API keys (internal/apikey);
// JWTs are three base64url parts, the first a JSON header ("eyJ");
// Bearer and Basic credentials are whatever follows the scheme; URL
// parameters named like credentials carry them in URIs.
var secretRE = regexp.MustCompile(
	`syk_[A-Za-z0-9_-]+` +
		`|eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.?[A-Za-z0-9_-]*` +
		`|(?i:\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/-]+=*` +
		`|(?i:[?&;#][a-z0-9_-]*(?:token|key|secret|password|passwd|sig|signature)=)[^&#\s"']*`)

// ScrubString returns s with secret-shaped substrings replaced: API keys
// (syk_...), JWT-looking strings (eyJ... with two dots), the credentials
// after "Bearer " and "Basic ", and the values of credential URL
// parameters (?token=, &api_key=, ...). It is cheap on strings that hold
// none of them (no regexp runs).
func ScrubString(s string) string {
	if !maybeSecret(s) {
		return s
	}
	return secretRE.ReplaceAllStringFunc(s, func(m string) string {
		switch {
		case m[0] == '?' || m[0] == '&' || m[0] == ';' || m[0] == '#':
			eq := strings.IndexByte(m, '=')
			return m[:eq+1] + Redacted
		case len(m) > 6 && (strings.EqualFold(m[:6], "bearer") || strings.EqualFold(m[:5], "basic")):
			sp := strings.IndexAny(m, " \t\r\n")
			return m[:sp+1] + Redacted
		}
		return Redacted
	})
}

// maybeSecret is a quick filter for ScrubString: false means no secret
// shape can match.
func maybeSecret(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 's':
			if strings.HasPrefix(s[i:], "syk_") {
				return true
			}
		case 'e':
			if strings.HasPrefix(s[i:], "eyJ") {
				return true
			}
		case '=':
			return true
		case ' ', '\t', '\n', '\r':
			if i >= 5 {
				w := s[i-5 : i]
				if strings.EqualFold(w, "basic") || i >= 6 && strings.EqualFold(s[i-6:i], "bearer") {
					return true
				}
			}
		}
	}
	return false
}
