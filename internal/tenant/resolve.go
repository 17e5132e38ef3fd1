package tenant

// match accumulates the tenant ids a principal's lookups hit.
type match struct {
	id        int32 // first tenant seen; valid when n > 0
	rec       int   // the slot of a record of tenant id, which holds its name
	n         int   // lookups that hit
	ambiguous bool
}

// see counts the tenant of the record in slot o, if it has one.
func (m *match) see(t *table, o int) {
	id := t.tenant(o)
	switch {
	case id == noTenant:
		return
	case id == ambiguous, m.n > 0 && id != m.id:
		m.ambiguous = true
	}
	m.id, m.rec = id, o
	m.n++
}

// keptGroups is how many of a principal's group records Resolve keeps on
// its stack for pairing with compound prefixes; groups past it are looked
// up again for each prefix.
const keptGroups = 16

// Resolve returns the tenant p belongs to. Every selector that matches p is
// considered, not only the first: if they belong to two or more tenants the
// result is [ErrAmbiguous]; if none matches it is [ErrNoTenant]. The same
// tenant matched by several selectors is not ambiguous.
//
// Its cost grows with the number of p's claim values and groups (and their
// product, for the claim values that begin a compound selector of p's
// issuer), not with the number of tenants: each of p's strings that a
// selector could name is hashed once and looked up in one table. It does
// not allocate. It is safe for concurrent use.
func (x *Index) Resolve(p *Principal) (string, error) {
	var m match
	if len(x.t.tags) > 0 { // the zero Index and one built from nothing
		x.visit(p, &m)
	}
	switch {
	case m.ambiguous:
		return "", ErrAmbiguous
	case m.n == 0:
		return "", ErrNoTenant
	}
	return x.t.name(m.rec), nil
}

// unknownIssuer is the issuer record before Resolve needs it.
const unknownIssuer = -2

func (x *Index) visit(p *Principal, m *match) {
	t := &x.t
	var groups [keptGroups]int
	if x.hasGroups {
		for i, g := range p.Groups {
			o := x.group(g)
			if i < len(groups) {
				groups[i] = o
			}
			if o != notFound {
				m.see(t, o)
			}
		}
	}
	if !x.hasClaims {
		return
	}
	// The issuer is looked up only once a claim value begins some compound
	// selector: most principals' values begin none, and an issuer is a
	// long string to hash.
	issuer := unknownIssuer
	if p.Issuer == "" {
		issuer = notFound
	}
	for _, c := range p.Claims {
		in := x.claims.info(c.Name)
		if in.role == 0 || in.role == roleCompound && issuer == notFound {
			continue
		}
		o := t.findString(stringHash(t.hashString(c.Value), kindClaim, in.index), kindClaim, in.index, c.Value)
		if o == notFound {
			continue
		}
		m.see(t, o)
		if t.flags(o)&flagCompound == 0 {
			continue
		}
		if issuer == unknownIssuer {
			issuer = t.findString(stringHash(t.hashString(p.Issuer), kindIssuer, 0), kindIssuer, 0, p.Issuer)
		}
		if issuer != notFound {
			x.visitCompound(p, issuer, o, &groups, m)
		}
	}
}

func (x *Index) group(g string) int {
	return x.t.findString(stringHash(x.t.hashString(g), kindGroup, 0), kindGroup, 0, g)
}

// visitCompound pairs claim record c with p's groups if c begins a
// compound selector of p's issuer.
func (x *Index) visitCompound(p *Principal, issuer, c int, groups *[keptGroups]int, m *match) {
	t := &x.t
	prefix := t.findPair(kindPrefix, uint32(issuer), uint32(c))
	if prefix == notFound {
		return
	}
	for i, g := range p.Groups {
		o := notFound
		if i < len(groups) {
			o = groups[i]
		} else {
			o = x.group(g)
		}
		if o != notFound {
			if cp := t.findPair(kindCompound, uint32(prefix), uint32(o)); cp != notFound {
				m.see(t, cp)
			}
		}
	}
}
