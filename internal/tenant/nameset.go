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

// nameInfo is what a nameSet knows of one claim name: its index, which
// the table's claim records carry instead of the name, and its roles.
type nameInfo struct {
	index uint32
	role  role
}

// nameSet maps the claim names selectors use to their [nameInfo]. It is
// built in m; freeze moves a small set into the slices, which answer
// faster. The zero value is empty.
type nameSet struct {
	m     map[string]nameInfo
	names []string
	infos []nameInfo
}

// add gives name role r and returns its index.
func (s *nameSet) add(name string, r role) uint32 {
	if s.m == nil {
		s.m = map[string]nameInfo{}
	}
	in, ok := s.m[name]
	if !ok {
		in.index = uint32(len(s.m))
	}
	in.role |= r
	s.m[name] = in
	return in.index
}

func (s *nameSet) freeze() {
	if len(s.m) > smallSet {
		return
	}
	for name, in := range s.m {
		s.names, s.infos = append(s.names, name), append(s.infos, in)
	}
	s.m = nil
}

// info returns what s knows of name; its role is 0 if no selector names
// it.
func (s *nameSet) info(name string) nameInfo {
	if s.m != nil {
		return s.m[name]
	}
	for i, n := range s.names {
		if n == name {
			return s.infos[i]
		}
	}
	return nameInfo{}
}
