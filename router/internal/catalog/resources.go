package catalog

import (
	"errors"
	"regexp"
	"slices"
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

// federatedTemplates returns the compiled templates of es (the federated
// resource templates, in list order), taken from pass (each upstream's
// compiled templates, sorted by template), so that each compiles once.
func federatedTemplates(es []*Entry, pass map[string][]template) []template {
	out := make([]template, 0, len(es))
	for _, e := range es {
		ts := pass[e.Upstream]
		if i, found := slices.BinarySearchFunc(ts, e.Name, func(t template, name string) int {
			return strings.Compare(t.name, name)
		}); found {
			out = append(out, ts[i])
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

// ResourceUpstream returns the upstream that serves uri (a resources/read,
// subscribe or unsubscribe) in the federated view as pol sees it, only if
// pol allows the URI there (kind resources, subject the URI): the upstream
// listing that exact resource; else the one listing uri as a resource
// template (decided as kind resource_templates); else the first upstream
// (in template list order) with a resource template pol allows that
// matches it; else, when exactly one upstream pol sees has any resource or
// template, that one, unless uri matches one of its templates pol denies
// (a template the tenant may not see routes nothing). Items and upstreams
// pol denies take no part, as if they did not exist. ok is false when no
// upstream can be named or pol denies the URI on the one named. It
// allocates nothing.
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
	for _, kind := range [...]string{proto.KindResources, proto.KindResourceTemplates} {
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
	// The upstream alone knows whether such a URI exists, and its answer
	// (a subscription to any URI may succeed) would tell a URI the policy
	// denies from one that does not exist: a tenant whose policy restricts
	// resources at all gets no fallback.
	if only == "" || pol.Restricts(policy.KindResources) || s.deniedTemplateMatches(only, uri, pol) {
		return "", false
	}
	return only, pol.Allowed(policy.KindResources, only, uri)
}

// deniedTemplateMatches reports whether uri matches a resource template of
// upstream (up or not) that pol denies.
func (s *Snapshot) deniedTemplateMatches(upstream, uri string, pol *policy.Policy) bool {
	ts := s.passTemplates[upstream]
	for i := range ts {
		if !pol.Allowed(policy.KindResourceTemplates, upstream, ts[i].name) && ts[i].re.MatchString(uri) {
			return true
		}
	}
	return false
}

// allowedTemplateMatches reports whether uri matches a resource template of
// upstream (up or not) that pol allows.
func (s *Snapshot) allowedTemplateMatches(upstream, uri string, pol *policy.Policy) bool {
	ts := s.passTemplates[upstream]
	for i := range ts {
		if pol.Allowed(policy.KindResourceTemplates, upstream, ts[i].name) && ts[i].re.MatchString(uri) {
			return true
		}
	}
	return false
}

// PassthroughResource reports whether a resources/read, subscribe or
// unsubscribe of uri in upstream's passthrough view may go to upstream
// under pol, as [Snapshot.ResourceUpstream] decides in the federated view:
// a resource the view lists, or a URI that matches one of its resource
// templates pol allows, is decided on the URI (kind resources); a URI that
// is itself one of its templates is decided on that template (kind
// resource_templates); any other URI goes only under a policy that does
// not restrict resources ([policy.Policy.Restricts]) and matches no
// template of upstream that pol denies.
func (s *Snapshot) PassthroughResource(upstream, uri string, pol *policy.Policy) bool {
	if _, found := s.List(proto.KindResources, upstream).Lookup(uri); found {
		return pol.Allowed(policy.KindResources, upstream, uri)
	}
	if _, found := s.List(proto.KindResourceTemplates, upstream).Lookup(uri); found {
		return pol.Allowed(policy.KindResourceTemplates, upstream, uri)
	}
	if s.allowedTemplateMatches(upstream, uri, pol) {
		return pol.Allowed(policy.KindResources, upstream, uri)
	}
	// Neither listed nor under an allowed template: as the federated
	// view's fallback, only for a policy that does not restrict resources.
	return !pol.Restricts(policy.KindResources) && !s.deniedTemplateMatches(upstream, uri, pol) &&
		pol.Allowed(policy.KindResources, upstream, uri)
}

// CompletionUpstream returns the upstream a completion/complete reference
// of type ref/resource naming ref goes to, in view ("" for the federated
// view, else an upstream's passthrough view), and whether pol allows it:
// the upstream listing ref as a resource template (decided as kind
// resource_templates, subject the template), else the one listing ref as
// a resource (kind resources, subject the URI). In the federated view,
// when two upstreams list ref, the first by name that pol sees is taken.
// A reference no upstream pol sees lists is refused, whatever its form,
// so that a denied template and a nonexistent one get the same answer
// (docs/policy.md): completion is offered only for what the tenant's
// lists show. It allocates nothing.
func (s *Snapshot) CompletionUpstream(view, ref string, pol *policy.Policy) (upstream string, ok bool) {
	for _, k := range [...]struct {
		list string
		pol  policy.Kind
	}{{proto.KindResourceTemplates, policy.KindResourceTemplates}, {proto.KindResources, policy.KindResources}} {
		if u := s.listedBy(k.list, view, ref, pol); u != "" {
			return u, pol.Allowed(k.pol, u, ref)
		}
	}
	return "", false
}

// listedBy returns the upstream pol sees whose list of kind in view holds
// name, or "": in the federated view the one the view keeps, or else the
// first by name of those pol sees.
func (s *Snapshot) listedBy(kind, view, name string, pol *policy.Policy) string {
	if view != "" {
		if _, found := s.List(kind, view).Lookup(name); found && pol.Upstream(view) {
			return view
		}
		return ""
	}
	if e, found := s.List(kind, "").Lookup(name); !found {
		return "" // every name a passthrough view holds is in the federated view
	} else if pol.Upstream(e.Upstream) {
		return e.Upstream
	}
	best := ""
	for u, v := range s.lists[kind].pass {
		if (best == "" || u < best) && pol.Upstream(u) {
			if _, found := v.Lookup(name); found {
				best = u
			}
		}
	}
	return best
}
