package publicurl

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Origins is a set of allowed browser origins (the Origin header, RFC
// 6454: scheme "://" host [":" port]), edge.allowed_origins: exact
// origins ("https://app.example.com"), patterns with "*" standing for
// a run of host characters (letters, digits, '.', '-';
// "https://*.example.com") or, after ':', of port digits
// ("http://localhost:*"), and "*" for any origin. Matching ignores letter case. The zero value allows nothing.
// Safe for concurrent use (read only after ParseOrigins).
type Origins struct {
	any      bool
	exact    map[string]bool
	patterns []*regexp.Regexp
}

// ParseOrigins parses the configured origins. Errors name the first entry
// that is not an origin or a pattern of one (a path, a query, user
// information, or a scheme other than http or https).
func ParseOrigins(entries []string) (*Origins, error) {
	o := &Origins{exact: map[string]bool{}}
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "*" {
			o.any = true
			continue
		}
		if err := checkOrigin(e); err != nil {
			return nil, fmt.Errorf("%q: %w", e, err)
		}
		if strings.Contains(e, "*") {
			// A '*' after ':' is a port (digits), any other a run of host
			// characters.
			parts := strings.Split(e, "*")
			var re strings.Builder
			re.WriteString("^")
			for i, p := range parts {
				re.WriteString(regexp.QuoteMeta(p))
				switch {
				case i == len(parts)-1:
				case strings.HasSuffix(p, ":"):
					re.WriteString("[0-9]+")
				default:
					re.WriteString("[a-z0-9.-]+")
				}
			}
			re.WriteString("$")
			o.patterns = append(o.patterns, regexp.MustCompile(re.String()))
		} else {
			o.exact[e] = true
		}
	}
	return o, nil
}

// checkOrigin checks that e (lower case) is an origin, "*"s standing for
// parts of its host or port.
func checkOrigin(e string) error {
	scheme, rest, ok := strings.Cut(e, "://")
	if !ok || scheme != "http" && scheme != "https" {
		return fmt.Errorf("not an http or https origin (scheme://host[:port])")
	}
	if rest == "" || strings.ContainsAny(rest, "/?#@ ") {
		return fmt.Errorf("an origin is scheme://host[:port], with no path, query or user")
	}
	probe := strings.ReplaceAll(rest, "*", "x")
	if strings.HasSuffix(probe, ":x") {
		probe = strings.TrimSuffix(probe, "x") + "1"
	}
	u, err := url.Parse(scheme + "://" + probe)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("an origin is scheme://host[:port]")
	}
	return nil
}

// Allowed reports whether origin, an Origin header's value, is in the set.
// "null" (an opaque origin) is allowed only by "*".
func (o *Origins) Allowed(origin string) bool {
	if o == nil {
		return false
	}
	if o.any {
		return true
	}
	origin = strings.ToLower(origin)
	if o.exact[origin] {
		return true
	}
	for _, p := range o.patterns {
		if p.MatchString(origin) {
			return true
		}
	}
	return false
}
