package policy

import "slices"

// ScopeRule requires OAuth scopes of a caller (a JWT's scope or scp
// claim; docs/policy.md): Scopes, every one of them, for
//
//   - every request of the tenant, when Upstream and Pattern are empty;
//   - every request to Upstream (its endpoint /mcp/<upstream>, and in the
//     federated view the calls to its tools and prompts by name), when
//     Upstream is set and Pattern empty;
//   - the calls (tools/call, prompts/get, resources/read and subscribe,
//     completion/complete of a prompt) whose subject, as [Policy.Allowed]
//     has it, matches Pattern, of Kind ("" for every kind), when Pattern
//     is set (and of Upstream's, in its own view, when that is set too).
//
// A caller without them gets HTTP 403 with a Bearer challenge naming
// what is missing (error="insufficient_scope", RFC 6750 section 3.1;
// MCP authorization, "Scope Challenge Handling"). An API key caller has
// no scopes.
type ScopeRule struct {
	Upstream string   `json:"upstream,omitempty" yaml:"upstream,omitempty" msgpack:"upstream,omitempty"`
	Kind     Kind     `json:"kind,omitempty" yaml:"kind,omitempty" msgpack:"kind,omitempty"`
	Pattern  string   `json:"pattern,omitempty" yaml:"pattern,omitempty" msgpack:"pattern,omitempty"`
	Scopes   []string `json:"scopes" yaml:"scopes" msgpack:"scopes"`
}

type scopeRule struct {
	upstream string
	kinds    [numKinds]bool // the kinds a pattern rule applies to
	g        *glob          // nil: no pattern
	scopes   []string
}

// compileScopes validates and compiles the scope rules of a Spec.
func compileScopes(rules []ScopeRule, bad func(string, ...any)) []scopeRule {
	out := make([]scopeRule, 0, len(rules))
	for i, r := range rules {
		if len(r.Scopes) == 0 {
			bad("scope rule %d: no scopes", i)
			continue
		}
		if slices.Contains(r.Scopes, "") {
			bad("scope rule %d: an empty scope", i)
			continue
		}
		cr := scopeRule{upstream: r.Upstream, scopes: slices.Clone(r.Scopes)}
		if r.Kind != "" && kindIndex(r.Kind) < 0 {
			bad("scope rule %d: unknown kind %q", i, r.Kind)
			continue
		}
		if r.Pattern == "" && r.Kind != "" {
			bad("scope rule %d: a kind without a pattern", i)
			continue
		}
		if r.Pattern != "" {
			g, err := compileGlob(r.Pattern)
			if err != nil {
				bad("scope rule %d: pattern %q: %v", i, r.Pattern, err)
				continue
			}
			cr.g = &g
			for j := range cr.kinds {
				cr.kinds[j] = appliesTo(r.Kind, j)
			}
		}
		out = append(out, cr)
	}
	return out
}

// Call is what a scope decision looks at: the upstream a request goes to
// ("" when the edge cannot tell: the federated view's resources), and for
// a call, its kind and subject (as [Policy.Allowed] has them; Kind ""
// for a request that names no item).
type Call struct {
	Upstream string
	Kind     Kind
	Subject  string
}

// RequiredScopes returns the scopes the rules require of c, in rule
// order without repeats; nil when none (or p is nil). It allocates only
// when a rule applies.
func (p *Policy) RequiredScopes(c Call) []string {
	if p == nil || len(p.scopes) == 0 {
		return nil
	}
	var req []string
	k := kindIndex(c.Kind)
	for i := range p.scopes {
		r := &p.scopes[i]
		if r.upstream != "" && r.upstream != c.Upstream {
			continue
		}
		if r.g != nil && (k < 0 || !r.kinds[k] || !r.g.match(c.Subject)) {
			continue
		}
		for _, s := range r.scopes {
			if !slices.Contains(req, s) {
				req = append(req, s)
			}
		}
	}
	return req
}

// Missing returns the scopes of required that has lacks, in order.
func Missing(required, has []string) []string {
	var m []string
	for _, s := range required {
		if !slices.Contains(has, s) {
			m = append(m, s)
		}
	}
	return m
}

// HasScopeRules reports whether p requires scopes of anything.
func (p *Policy) HasScopeRules() bool { return p != nil && len(p.scopes) > 0 }
