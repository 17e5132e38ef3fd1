package policy

import "math/bits"

// Item is one listed item to bind: Name is what callers will look it up
// by (the name or URI clients use in that view: a federated name, possibly
// shortened, or a passthrough view's bare name), Upstream serves it, and
// Subject is what the rules match (see [Policy.Allowed]); an empty Subject
// means Name.
type Item struct {
	Name     string
	Upstream string
	Subject  string
}

// Values of Bound.byName.
const (
	valDenied  = 1
	valAllowed = 2
)

// Bound is a [Policy]'s decisions on one list of one kind, made once: a
// hash table from name to decision and a bitmap by list index. It is immutable
// and safe for concurrent use. A nil *Bound denies everything.
//
// Build one per (policy, catalog snapshot, list) with [Policy.Bind] and
// drop it with the snapshot: a Bound does not see later catalog changes.
type Bound struct {
	p       *Policy
	kind    int   // slot, or -1
	byName  table // valAllowed or valDenied
	bits    []uint64
	n       int
	visible int
}

// Bind decides every item of the list of kind kind once. The index of an
// item in items is its index in the Bound ([Bound.Visible],
// [Bound.AppendVisible]). Names should be unique; for a repeated name the
// first item decides lookups by name. An unknown kind binds a list with
// nothing visible. Bind allocates the map and bitmap (O(len(items))) and
// keeps no reference to items.
func (p *Policy) Bind(kind Kind, items []Item) *Bound {
	b := &Bound{
		p:      p,
		kind:   kindIndex(kind),
		byName: newTable(len(items)),
		bits:   make([]uint64, (len(items)+63)/64),
		n:      len(items),
	}
	for i, it := range items {
		subject := it.Subject
		if subject == "" {
			subject = it.Name
		}
		ok := p.Allowed(kind, it.Upstream, subject)
		if ok {
			b.bits[i/64] |= 1 << (i % 64)
			b.visible++
		}
		v := uint8(valDenied)
		if ok {
			v = valAllowed
		}
		b.byName.put(it.Name, v) // keeps the first of duplicates
	}
	return b
}

// Allowed reports the decision on the item named name: one map lookup
// when name was bound. A name that was not bound falls back to evaluating
// the patterns with name as the subject and upstream as its upstream
// (still without allocating); that is how a resource URI that is read
// through a resource template, and so never listed, is decided. For tools
// and prompts an unbound name is not in the catalog at all, so callers
// answer it as unknown whatever the decision.
func (b *Bound) Allowed(upstream, name string) bool {
	if b == nil {
		return false
	}
	if v := b.byName.get(name); v != 0 {
		return v == valAllowed
	}
	if b.kind < 0 || !b.p.Upstream(upstream) {
		return false
	}
	return b.p.decide(b.kind, name)
}

// Len is the number of items bound.
func (b *Bound) Len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// NumVisible is the number of bound items allowed.
func (b *Bound) NumVisible() int {
	if b == nil {
		return 0
	}
	return b.visible
}

// Visible reports whether the item at index i of the bound list is
// allowed; false when i is out of range.
func (b *Bound) Visible(i int) bool {
	if b == nil || i < 0 || i >= b.n {
		return false
	}
	return b.bits[i/64]&(1<<(i%64)) != 0
}

// AppendVisible appends to dst the indexes of the allowed items at index
// from or later, in order, at most limit of them (all of them when limit
// is negative), and returns the extended slice: a list page is
// AppendVisible(buf[:0], next, pageSize). It allocates only when dst
// lacks capacity, so a caller that reuses a buffer of [Bound.NumVisible]
// (or page size) capacity filters without allocating.
func (b *Bound) AppendVisible(dst []int, from, limit int) []int {
	if b == nil || limit == 0 || from >= b.n {
		return dst
	}
	from = max(from, 0)
	wi := from / 64
	w := b.bits[wi] &^ (1<<(from%64) - 1)
	for {
		for w != 0 {
			dst = append(dst, wi*64+bits.TrailingZeros64(w))
			if limit--; limit == 0 {
				return dst
			}
			w &= w - 1
		}
		if wi++; wi == len(b.bits) {
			return dst
		}
		w = b.bits[wi]
	}
}

// AppendAllowed appends to dst the indexes of the items that p allows, in
// order, deciding each by its patterns as [Policy.Allowed] does, and
// returns the extended slice. It is the filter for a list that is not
// bound; it allocates only when dst lacks capacity.
func (p *Policy) AppendAllowed(dst []int, kind Kind, items []Item) []int {
	for i := range items {
		it := &items[i]
		subject := it.Subject
		if subject == "" {
			subject = it.Name
		}
		if p.Allowed(kind, it.Upstream, subject) {
			dst = append(dst, i)
		}
	}
	return dst
}
