package tenant

import (
	"errors"
	"fmt"
)

// ambiguous is stored for a selector that two different tenants list: any
// principal it matches is refused.
const ambiguous = -1

type claimKey struct{ name, value string }

type prefixKey struct{ issuer, name, value string }

type compoundKey struct{ issuer, name, value, group string }

// Index maps principals to tenants. It is immutable once [Build] returns it
// and safe for concurrent use; to apply a change, build a new one and swap
// it in (an atomic.Pointer). The zero Index matches no principal.
type Index struct {
	tenants []string // by id; ids are the map values below

	// A principal carries claims no selector names (sub, email, iat...);
	// names skips them before their values are hashed, and the filter
	// skips values and groups no selector lists.
	names  nameSet
	filter filter
	claims map[claimKey]int32
	groups map[string]int32

	// Compound selectors are looked up in two steps so that only claim
	// values that start some compound selector are paired with groups.
	compoundPrefix map[prefixKey]struct{}
	compound       map[compoundKey]int32
}

// Build indexes the selectors of every tenant. It rejects an empty tenant
// name, a tenant without selectors and a selector of no valid [Shape],
// reporting every problem at once, each wrapping [ErrInvalid]. A selector
// listed twice for the same tenant is harmless; one listed for two tenants
// is kept, and every principal it matches is refused with [ErrAmbiguous].
func Build(tenants []TenantSelectors) (*Index, error) {
	if err := validate(tenants); err != nil {
		return nil, err
	}
	x := newIndex(tenants)
	ids := make(map[string]int32, len(tenants))
	for _, ts := range tenants {
		id, ok := ids[ts.Tenant]
		if !ok {
			id = int32(len(x.tenants))
			ids[ts.Tenant] = id
			x.tenants = append(x.tenants, ts.Tenant)
		}
		for _, s := range ts.Selectors {
			x.add(s, id)
		}
	}
	x.names.freeze()
	return x, nil
}

func validate(tenants []TenantSelectors) error {
	var errs []error
	for i, ts := range tenants {
		if ts.Tenant == "" {
			errs = append(errs, fmt.Errorf("tenant %d: empty name: %w", i, ErrInvalid))
		}
		if len(ts.Selectors) == 0 {
			errs = append(errs, fmt.Errorf("tenant %q: no selectors: %w", ts.Tenant, ErrInvalid))
		}
		for j, s := range ts.Selectors {
			if s.Shape() == ShapeInvalid {
				errs = append(errs, fmt.Errorf("tenant %q selector %d %+v: %w", ts.Tenant, j, s, ErrInvalid))
			}
		}
	}
	if len(tenants) > 1<<31-1 {
		errs = append(errs, fmt.Errorf("%d tenants: %w", len(tenants), ErrInvalid))
	}
	return errors.Join(errs...)
}

func newIndex(tenants []TenantSelectors) *Index {
	n := 0
	for _, ts := range tenants {
		n += len(ts.Selectors)
	}
	return &Index{
		filter:         newFilter(2 * n),
		claims:         map[claimKey]int32{},
		groups:         map[string]int32{},
		compoundPrefix: map[prefixKey]struct{}{},
		compound:       map[compoundKey]int32{},
	}
}

func (x *Index) add(s Selector, id int32) {
	switch s.Shape() {
	case ShapeClaim:
		x.names.add(s.Claim, roleClaim)
		x.filter.add(s.Value)
		put(x.claims, claimKey{s.Claim, s.Value}, id)
	case ShapeGroup:
		x.filter.add(s.Group)
		put(x.groups, s.Group, id)
	case ShapeCompound:
		x.names.add(s.Claim, roleCompound)
		x.filter.add(s.Value)
		x.filter.add(s.Group)
		x.compoundPrefix[prefixKey{s.Issuer, s.Claim, s.Value}] = struct{}{}
		put(x.compound, compoundKey{s.Issuer, s.Claim, s.Value, s.Group}, id)
	}
}

func put[K comparable](m map[K]int32, k K, id int32) {
	if old, ok := m[k]; ok && old != id {
		id = ambiguous
	}
	m[k] = id
}

// Len returns the number of distinct tenants in x.
func (x *Index) Len() int { return len(x.tenants) }
