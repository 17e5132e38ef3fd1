package tenant

// smallSet is the size up to which a nameSet compares strings instead of
// hashing them: deployments name few claims in selectors.
const smallSet = 8

// role says which selector shapes name a claim.
type role uint8

const (
	roleClaim role = 1 << iota
	roleCompound
)

// nameSet maps the claim names selectors use to their roles. It is built
// in m; freeze moves a small set into the slices, which answer faster.
// The zero value is empty.
type nameSet struct {
	m     map[string]role
	names []string
	roles []role
}

func (s *nameSet) add(name string, r role) {
	if s.m == nil {
		s.m = map[string]role{}
	}
	s.m[name] |= r
}

func (s *nameSet) freeze() {
	if len(s.m) > smallSet {
		return
	}
	for name, r := range s.m {
		s.names, s.roles = append(s.names, name), append(s.roles, r)
	}
	s.m = nil
}

func (s *nameSet) role(name string) role {
	if s.m != nil {
		return s.m[name]
	}
	for i, n := range s.names {
		if n == name {
			return s.roles[i]
		}
	}
	return 0
}
