package tenant

import (
	"errors"
	"slices"
	"testing"
)

// Small alphabets so that random inputs collide often.
var (
	fuzzIssuers = []string{"", "iss-a", "iss-b"}
	fuzzNames   = []string{"org", "dept", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"} // more than smallSet
	fuzzValues  = []string{"x", "y", "z"}
	fuzzGroups  = []string{"g1", "g2", "g3"}
)

func pick(s []string, b byte) string { return s[int(b)%len(s)] }

// fuzzTenants reads two bytes per selector: tenant and shape, then fields.
func fuzzTenants(b []byte) []TenantSelectors {
	var ts []TenantSelectors
	for ; len(b) >= 2; b = b[2:] {
		s := Selector{Group: pick(fuzzGroups, b[1]>>4)}
		switch b[0] / 4 % 3 {
		case 0:
			s = Selector{Claim: pick(fuzzNames, b[1]), Value: pick(fuzzValues, b[1]>>1)}
		case 2:
			s.Issuer = pick(fuzzIssuers[1:], b[1]>>3)
			s.Claim, s.Value = pick(fuzzNames, b[1]), pick(fuzzValues, b[1]>>1)
		}
		ts = append(ts, TenantSelectors{Tenant: pick([]string{"t0", "t1", "t2", "t3"}, b[0]), Selectors: []Selector{s}})
	}
	return ts
}

// fuzzPrincipal reads the issuer, then one claim value or group per byte.
func fuzzPrincipal(b []byte) *Principal {
	p := &Principal{}
	if len(b) > 0 {
		p.Issuer, b = pick(fuzzIssuers, b[0]), b[1:]
	}
	for _, c := range b {
		if c&1 == 0 {
			p.AddClaim(pick(fuzzNames, c>>1), pick(fuzzValues, c>>2))
		} else {
			p.Groups = append(p.Groups, pick(fuzzGroups, c>>1))
		}
	}
	return p
}

// matches is the definition Resolve must agree with, by scanning.
func (s Selector) matches(p *Principal) bool {
	hasClaim := slices.Contains(p.Claims, Claim{s.Claim, s.Value})
	inGroup := slices.Contains(p.Groups, s.Group)
	switch s.Shape() {
	case ShapeClaim:
		return hasClaim
	case ShapeGroup:
		return inGroup
	case ShapeCompound:
		return p.Issuer == s.Issuer && hasClaim && inGroup
	}
	return false
}

func scanResolve(ts []TenantSelectors, p *Principal) (string, error) {
	var found []string
	for _, t := range ts {
		for _, s := range t.Selectors {
			if s.matches(p) && !slices.Contains(found, t.Tenant) {
				found = append(found, t.Tenant)
			}
		}
	}
	switch len(found) {
	case 0:
		return "", ErrNoTenant
	case 1:
		return found[0], nil
	}
	return "", ErrAmbiguous
}

// FuzzTenantResolve: for any selectors and principal, the index gives the
// answer a scan of every selector gives.
func FuzzTenantResolve(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 9, 0x10}, []byte{1, 0, 3})
	f.Add([]byte{8, 0x11, 9, 0x21}, []byte{1, 0, 1, 3})
	f.Add([]byte{0, 0, 1, 0}, []byte{0, 0})
	f.Fuzz(func(t *testing.T, sel, prin []byte) {
		ts := fuzzTenants(sel)
		p := fuzzPrincipal(prin)
		x, err := Build(ts)
		if err != nil {
			t.Fatal(err)
		}
		got, gotErr := x.Resolve(p)
		want, wantErr := scanResolve(ts, p)
		if got != want || !errors.Is(gotErr, wantErr) {
			t.Fatalf("tenants %+v principal %+v: Resolve = %q, %v; scan = %q, %v", ts, p, got, gotErr, want, wantErr)
		}
	})
}
