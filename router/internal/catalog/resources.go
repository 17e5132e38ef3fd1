package catalog

import (
	"errors"
	"regexp"
	"strings"

	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// template is one federated resource template, compiled for matching.
type template struct {
	upstream string
	name     string // the URI template: its policy subject
	re       *regexp.Regexp
}

// compileTemplates compiles the URI templates of es (resource template
// entries); a template that does not compile is left out.
func compileTemplates(es []*Entry) []template {
	out := make([]template, 0, len(es))
	for _, e := range es {
		if re, err := templateRegexp(e.Name); err == nil {
			out = append(out, template{upstream: e.Upstream, name: e.Name, re: re})
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
// view as pol sees it, only if pol allows the URI there (kind resources,
// subject the URI): the upstream listing that exact resource; else the one
// listing it as a resource template (a completion reference names the
// template itself, decided as kind resource_templates); else the first
// upstream (in template list order) with a resource template pol allows
// that matches it; else, when exactly one upstream pol sees has any
// resource or template, that one. Items and upstreams pol denies take no
// part, as if they did not exist. ok is false when no upstream can be
// named or pol denies the URI on the one named.
func (s *Snapshot) ResourceUpstream(uri string, pol *policy.Policy) (upstream string, ok bool) {
	if e, found := s.List(proto.KindResources, "").Lookup(uri); found && pol.Upstream(e.Upstream) {
		return e.Upstream, pol.Allowed(policy.KindResources, e.Upstream, uri)
	}
	if e, found := s.List(proto.KindResourceTemplates, "").Lookup(uri); found && pol.Upstream(e.Upstream) {
		return e.Upstream, pol.Allowed(policy.KindResourceTemplates, e.Upstream, uri)
	}
	for i := range s.templates {
		t := &s.templates[i]
		if pol.Allowed(policy.KindResourceTemplates, t.upstream, t.name) && t.re.MatchString(uri) {
			return t.upstream, pol.Allowed(policy.KindResources, t.upstream, uri)
		}
	}
	only := ""
	for _, kind := range []string{proto.KindResources, proto.KindResourceTemplates} {
		for u, v := range s.lists[kind].pass {
			if len(v.all) == 0 || u == only || !pol.Upstream(u) {
				continue
			}
			if only != "" {
				return "", false
			}
			only = u
		}
	}
	if only == "" {
		return "", false
	}
	return only, pol.Allowed(policy.KindResources, only, uri)
}

// PassthroughResource reports whether a resources/read, subscribe or
// unsubscribe of uri in upstream's passthrough view may go to upstream
// under pol: pol allows the URI there (kind resources) or, for a
// completion reference naming one of its resource templates, that
// template (kind resource_templates).
func (s *Snapshot) PassthroughResource(upstream, uri string, pol *policy.Policy) bool {
	if _, found := s.List(proto.KindResourceTemplates, upstream).Lookup(uri); found {
		return pol.Allowed(policy.KindResourceTemplates, upstream, uri)
	}
	return pol.Allowed(policy.KindResources, upstream, uri)
}
