package tenant

import "errors"

var (
	// ErrNoTenant is returned by [Index.Resolve] when no selector matches
	// the principal.
	ErrNoTenant = errors.New("tenant: no tenant matches the principal")
	// ErrAmbiguous is returned by [Index.Resolve] when selectors of two or
	// more different tenants match the principal.
	ErrAmbiguous = errors.New("tenant: principal matches more than one tenant")
	// ErrInvalid wraps every problem [Build] reports.
	ErrInvalid = errors.New("tenant: invalid selector")
)

// Claim is one value of one claim. A claim with several values (an array
// in a JWT) appears once per value, so a [Principal] keeps its claims in one
// flat slice that can be refilled without allocating.
type Claim struct {
	Name  string
	Value string
}

// Principal is what authentication knows about a caller: the issuer that
// vouched for it (a JWT's iss, or the issuer name the edge gives API keys),
// its claim values and its groups. Every field may be empty.
//
// The edge fills a Principal per request; [Principal.Reset] empties it
// while keeping the slices' capacity, so a pooled Principal is refilled
// without allocating. A Principal must not change while
// [Index.Resolve] reads it.
type Principal struct {
	Issuer string
	Claims []Claim
	Groups []string
	// Scopes are the OAuth scopes the token grants (its scope claim, space
	// separated, and its scp claim, a string or an array); none for an API
	// key.
	Scopes []string
}

// AddClaim appends one [Claim] per value of the claim name.
func (p *Principal) AddClaim(name string, values ...string) {
	for _, v := range values {
		p.Claims = append(p.Claims, Claim{Name: name, Value: v})
	}
}

// Reset empties p, keeping the capacity of its slices. It clears them
// first so that a pooled Principal does not keep the last caller's strings
// alive.
func (p *Principal) Reset() {
	clear(p.Claims)
	clear(p.Groups)
	clear(p.Scopes)
	*p = Principal{Claims: p.Claims[:0], Groups: p.Groups[:0], Scopes: p.Scopes[:0]}
}

// Shape says which fields of a [Selector] are set.
type Shape uint8

const (
	// ShapeInvalid is any combination of fields not listed below.
	ShapeInvalid Shape = iota
	// ShapeClaim sets Claim and Value: the principal carries that value
	// of that claim, from any issuer.
	ShapeClaim
	// ShapeGroup sets Group: the principal is in that group, from any
	// issuer.
	ShapeGroup
	// ShapeCompound sets all four fields: the principal was issued by
	// Issuer, carries that claim value and is in Group.
	ShapeCompound
)

// Selector claims the principals that match it for a tenant. Its shape
// ([Selector.Shape]) follows from which fields are set; matching is exact
// and case-sensitive.
type Selector struct {
	Issuer string `json:"issuer,omitempty" yaml:"issuer,omitempty" msgpack:"issuer,omitempty"`
	Claim  string `json:"claim,omitempty" yaml:"claim,omitempty" msgpack:"claim,omitempty"`
	Value  string `json:"value,omitempty" yaml:"value,omitempty" msgpack:"value,omitempty"`
	Group  string `json:"group,omitempty" yaml:"group,omitempty" msgpack:"group,omitempty"`
}

// Shape returns the shape of s, or [ShapeInvalid].
func (s Selector) Shape() Shape {
	switch {
	case s.Issuer == "" && s.Claim != "" && s.Value != "" && s.Group == "":
		return ShapeClaim
	case s.Issuer == "" && s.Claim == "" && s.Value == "" && s.Group != "":
		return ShapeGroup
	case s.Issuer != "" && s.Claim != "" && s.Value != "" && s.Group != "":
		return ShapeCompound
	}
	return ShapeInvalid
}

// TenantSelectors lists the selectors of one tenant. A tenant may appear in
// several entries; their selectors add up.
type TenantSelectors struct {
	Tenant    string
	Selectors []Selector
}
