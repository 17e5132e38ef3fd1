package catalog

import (
	"errors"
	"regexp"
	"strings"

	"github.com/switchyard-mcp/switchyard/proto"
)

// template is one federated resource template, compiled for matching.
type template struct {
	upstream string
	re       *regexp.Regexp
}

// compileTemplates compiles the URI templates of es (resource template
// entries); a template that does not compile is left out.
func compileTemplates(es []*Entry) []template {
	out := make([]template, 0, len(es))
	for _, e := range es {
		if re, err := templateRegexp(e.Name); err == nil {
			out = append(out, template{upstream: e.Upstream, re: re})
		}
	}
	return out
}

// templateRegexp turns an RFC 6570 URI template into a regexp matching the
// URIs it can expand to. Simple expansions ({var}) match within one path
// segment; reserved and fragment expansions ({+var}, {#var}) match anything;
// label, path and parameter expansions ({.x} {/x} {;x}) match runs of their
// prefix; query expansions ({?x} {&x}) match the rest of the query.
func templateRegexp(t string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for t != "" {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(t))
			break
		}
		b.WriteString(regexp.QuoteMeta(t[:i]))
		j := strings.IndexByte(t[i:], '}')
		if j < 0 {
			return nil, errBadTemplate
		}
		expr := t[i+1 : i+j]
		t = t[i+j+1:]
		if expr == "" {
			return nil, errBadTemplate
		}
		b.WriteString(exprPattern(expr[0]))
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

var errBadTemplate = errors.New("catalog: malformed URI template")

// exprPattern is the pattern of one template expression by its operator.
func exprPattern(op byte) string {
	switch op {
	case '+':
		return `.*`
	case '#':
		return `(?:#.*)?`
	case '.':
		return `(?:\.[^/?#]*)*`
	case '/':
		return `(?:/[^?#]*)*`
	case ';':
		return `(?:;[^/?#]*)*`
	case '?', '&':
		return `(?:[?&][^#]*)?`
	default:
		return `[^/?#]*`
	}
}

// ResourceUpstream returns the upstream that serves uri in the federated
// view: the upstream listing that exact resource; else the first upstream
// (in template list order) with a resource template matching it; else, when
// exactly one catalog upstream lists any resource or template, that one.
// ok is false when no upstream can be named.
func (s *Snapshot) ResourceUpstream(uri string) (upstream string, ok bool) {
	if e, found := s.List(proto.KindResources, "").Lookup(uri); found {
		return e.Upstream, true
	}
	if e, found := s.List(proto.KindResourceTemplates, "").Lookup(uri); found {
		return e.Upstream, true // a completion ref names the template itself
	}
	for _, t := range s.templates {
		if t.re.MatchString(uri) {
			return t.upstream, true
		}
	}
	only := ""
	for _, kind := range []string{proto.KindResources, proto.KindResourceTemplates} {
		for u, v := range s.lists[kind].pass {
			if len(v.all) == 0 || u == only {
				continue
			}
			if only != "" {
				return "", false
			}
			only = u
		}
	}
	return only, only != ""
}
