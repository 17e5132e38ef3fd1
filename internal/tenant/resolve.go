package tenant

// match accumulates the tenant ids a principal's lookups hit.
type match struct {
	id        int32 // first tenant seen; valid when n > 0
	n         int   // lookups that hit
	ambiguous bool
}

func (m *match) see(id int32, ok bool) {
	switch {
	case !ok:
		return
	case id == ambiguous, m.n > 0 && id != m.id:
		m.ambiguous = true
	}
	m.id = id
	m.n++
}

// Resolve returns the tenant p belongs to. Every selector that matches p is
// considered, not only the first: if they belong to two or more tenants the
// result is [ErrAmbiguous]; if none matches it is [ErrNoTenant]. The same
// tenant matched by several selectors is not ambiguous.
//
// Its cost grows with the number of p's claim values and groups (and their
// product, for the claim values that begin a compound selector), not with
// the number of tenants; it does not allocate. It is safe for concurrent
// use.
func (x *Index) Resolve(p *Principal) (string, error) {
	var m match
	x.visitClaims(p, &m)
	if len(x.groups) > 0 { // an index without group selectors hashes no group
		x.visitGroups(p, &m)
	}
	switch {
	case m.ambiguous:
		return "", ErrAmbiguous
	case m.n == 0:
		return "", ErrNoTenant
	}
	return x.tenants[m.id], nil
}

func (x *Index) visitClaims(p *Principal, m *match) {
	for _, c := range p.Claims {
		r := x.names.role(c.Name)
		if r == 0 || !x.filter.mayHave(c.Value) {
			continue
		}
		if r&roleClaim != 0 {
			id, ok := x.claims[claimKey{c.Name, c.Value}]
			m.see(id, ok)
		}
		if r&roleCompound != 0 {
			x.visitCompound(p, c, m)
		}
	}
}

func (x *Index) visitGroups(p *Principal, m *match) {
	for _, g := range p.Groups {
		if x.filter.mayHave(g) {
			id, ok := x.groups[g]
			m.see(id, ok)
		}
	}
}

// visitCompound pairs c with p's groups if c begins a compound selector of
// p's issuer.
func (x *Index) visitCompound(p *Principal, c Claim, m *match) {
	if _, ok := x.compoundPrefix[prefixKey{p.Issuer, c.Name, c.Value}]; !ok {
		return
	}
	for _, g := range p.Groups {
		if x.filter.mayHave(g) {
			id, ok := x.compound[compoundKey{p.Issuer, c.Name, c.Value, g}]
			m.see(id, ok)
		}
	}
}
