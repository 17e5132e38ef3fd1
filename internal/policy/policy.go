package policy

import (
	"errors"
	"fmt"
)

// Kind names what a name denotes. Its values are the list kinds of package
// proto (proto.KindTools and so on), so a proto kind converts directly.
type Kind string

// The kinds a policy decides on.
const (
	KindTools             Kind = "tools"              // subject: the federated name, <upstream><sep><tool>
	KindPrompts           Kind = "prompts"            // subject: the federated name, <upstream><sep><prompt>
	KindResources         Kind = "resources"          // subject: the URI
	KindResourceTemplates Kind = "resource_templates" // subject: the URI template
)

// kindIndex maps a kind to its slot in Policy.rules, or -1.
func kindIndex(k Kind) int {
	switch k {
	case KindTools:
		return 0
	case KindPrompts:
		return 1
	case KindResources:
		return 2
	case KindResourceTemplates:
		return 3
	}
	return -1
}

const numKinds = 4

// Effect is what a rule or a policy's default decides: [Allow] or [Deny].
type Effect string

// The effects.
const (
	Allow Effect = "allow"
	Deny  Effect = "deny"
)

// Rule is one allow or deny rule of a [Spec].
//
// Kind selects the names it applies to: [KindTools], [KindPrompts],
// [KindResources] (resources and resource templates), [KindResourceTemplates]
// (resource templates only), or "" for every kind.
//
// Pattern is a glob matched against the whole subject (anchored at both
// ends, case-sensitive, byte-exact):
//
//   - '*' matches any run of characters, including the empty run and '/'
//     (so "file:///secret/*" covers nested paths too, which is what a deny
//     rule needs); "**" is the same as "*".
//   - '?' matches exactly one character: one Unicode code point, or one
//     byte of a subject that is not valid UTF-8.
//   - '\' makes the next character literal ("\*", "\?", "\\"); a trailing
//     '\' is an error.
//   - Everything else, '[' and '{' included, is literal: there are no
//     character classes or alternations.
//
// Pattern must be non-empty valid UTF-8.
type Rule struct {
	Effect  Effect `json:"effect" yaml:"effect" msgpack:"effect"`
	Kind    Kind   `json:"kind,omitempty" yaml:"kind,omitempty" msgpack:"kind,omitempty"`
	Pattern string `json:"pattern" yaml:"pattern" msgpack:"pattern"`
}

// Spec is one tenant's policy as configured (YAML seed) or stored (KV):
// the input of [Compile]. The zero Spec sees no upstream and denies
// everything.
//
//   - AllUpstreams: the tenant sees every upstream; Upstreams must then be
//     empty.
//   - Upstreams: the upstreams the tenant sees; empty means none. Names are
//     catalog upstream names and must be non-empty.
//   - Rules: evaluated in order; the first whose kind applies and whose
//     pattern matches decides (first match wins).
//   - Default: the decision when no rule matches: [Allow], or [Deny] (also
//     when empty, so a missing default fails closed).
//
// Rules never make an invisible upstream's items visible: an item is
// allowed only if its upstream is visible and the rules (or the default)
// allow it.
type Spec struct {
	AllUpstreams bool     `json:"all_upstreams,omitempty" yaml:"all_upstreams,omitempty" msgpack:"all_upstreams,omitempty"`
	Upstreams    []string `json:"upstreams,omitempty" yaml:"upstreams,omitempty" msgpack:"upstreams,omitempty"`
	Rules        []Rule   `json:"rules,omitempty" yaml:"rules,omitempty" msgpack:"rules,omitempty"`
	Default      Effect   `json:"default,omitempty" yaml:"default,omitempty" msgpack:"default,omitempty"`
	// RequiredScopes are the OAuth scopes the tenant's callers need, for
	// everything, an upstream, or matching items ([ScopeRule]).
	RequiredScopes []ScopeRule `json:"required_scopes,omitempty" yaml:"required_scopes,omitempty" msgpack:"required_scopes,omitempty"`
}

// ErrInvalidSpec is wrapped by every error [Compile] returns.
var ErrInvalidSpec = errors.New("policy: invalid spec")

// Policy is a compiled [Spec]. It is immutable and safe for concurrent
// use. A nil *Policy denies everything and sees no upstream, so a caller
// that has not loaded its snapshot yet fails closed.
type Policy struct {
	all       bool
	upstreams table            // value 1: visible
	rules     [numKinds][]rule // per kind, in spec order
	def       bool
	scopes    []scopeRule // Spec.RequiredScopes, compiled
}

type rule struct {
	allow bool
	g     glob
}

// Compile validates spec and compiles its patterns once. It reports every
// problem at once (joined with errors.Join), each wrapping
// [ErrInvalidSpec]: an unknown effect or kind, an empty or malformed
// pattern, an empty upstream name, or AllUpstreams together with
// Upstreams. The returned Policy keeps no reference to spec.
func Compile(spec Spec) (*Policy, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidSpec}, args...)...))
	}
	p := &Policy{all: spec.AllUpstreams, upstreams: newTable(len(spec.Upstreams))}
	if spec.AllUpstreams && len(spec.Upstreams) > 0 {
		bad("all_upstreams together with an upstream list")
	}
	for _, u := range spec.Upstreams {
		if u == "" {
			bad("empty upstream name")
			continue
		}
		p.upstreams.put(u, 1)
	}
	switch spec.Default {
	case Allow:
		p.def = true
	case Deny, "":
	default:
		bad("default %q is neither allow nor deny", spec.Default)
	}
	for i, r := range spec.Rules {
		var allow bool
		switch r.Effect {
		case Allow:
			allow = true
		case Deny:
		default:
			bad("rule %d: effect %q is neither allow nor deny", i, r.Effect)
		}
		k := kindIndex(r.Kind)
		if r.Kind != "" && k < 0 {
			bad("rule %d: unknown kind %q", i, r.Kind)
		}
		if r.Pattern == "" {
			bad("rule %d: empty pattern", i)
			continue
		}
		g, err := compileGlob(r.Pattern)
		if err != nil {
			bad("rule %d: pattern %q: %v", i, r.Pattern, err)
			continue
		}
		cr := rule{allow: allow, g: g}
		for j := range p.rules {
			if appliesTo(r.Kind, j) {
				p.rules[j] = append(p.rules[j], cr)
			}
		}
	}
	p.scopes = compileScopes(spec.RequiredScopes, bad)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// appliesTo reports whether a rule of kind rk takes part in decisions on
// the kind in slot j.
func appliesTo(rk Kind, j int) bool {
	switch rk {
	case "":
		return true
	case KindResources:
		return j == 2 || j == 3
	}
	return kindIndex(rk) == j
}

// Upstream reports whether the tenant sees upstream. Callers use it for
// whole-upstream decisions (a passthrough endpoint /mcp/<upstream>, an
// upstream's notifications); item decisions include it already.
func (p *Policy) Upstream(upstream string) bool {
	if p == nil {
		return false
	}
	if p.all {
		return true
	}
	return p.upstreams.get(upstream) != 0
}

// Allowed reports whether the tenant may see and use the item of kind
// kind served by upstream whose policy subject is subject:
//
//   - tools and prompts: the federated name clients see in the federated
//     view, <upstream><sep><name>, or the short form the router gives a
//     long or clashing name (which keeps its start, so prefix globs
//     apply); a passthrough view's bare name is decided as that federated
//     name too (docs/policy.md);
//   - resources: the URI; resource templates: the URI template.
//
// It is false when the upstream is not visible, when the first matching
// rule denies, when no rule matches and the default is deny, and for an
// unknown kind. It evaluates the patterns (no map of precomputed
// decisions: see [Policy.Bind] for that) and allocates nothing.
//
// A denied item must be indistinguishable from a nonexistent one: callers
// leave it out of every list and answer a call, read or get of it exactly
// as they answer an unknown name (-32602 for tools), in the same message.
func (p *Policy) Allowed(kind Kind, upstream, subject string) bool {
	k := kindIndex(kind)
	if k < 0 || !p.Upstream(upstream) {
		return false
	}
	return p.decide(k, subject)
}

// decide evaluates the rules of kind slot k on subject, ignoring upstreams.
// Restricts reports whether p decides any name of kind k otherwise than
// "allowed": it has a rule that applies to the kind, or denies by default
// (an unknown kind: true). A caller that cannot tell whether an item
// exists (a resource URI no list shows, which only the upstream can
// answer for) serves such items only under a policy that does not
// restrict their kind, so that a denied item and a nonexistent one never
// get different answers.
func (p *Policy) Restricts(k Kind) bool {
	i := kindIndex(k)
	return i < 0 || !p.def || len(p.rules[i]) > 0
}

func (p *Policy) decide(k int, subject string) bool {
	rs := p.rules[k]
	for i := range rs {
		if rs[i].g.match(subject) {
			return rs[i].allow
		}
	}
	return p.def
}
