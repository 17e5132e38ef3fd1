package router

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/fields"
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/router/internal/catalog"
)

// scope is what one request is answered from: its tenant, that tenant's
// compiled policy and the catalog snapshot, each read once when the
// request arrives so that the whole request sees one state.
type scope struct {
	tenant string
	pol    *policy.Policy
	cat    *catalog.Snapshot
	// For the metrics: the code of the error the request was answered
	// with (0: none), and the kind a policy denial refused (policyTools,
	// ...; "" for none).
	code int32
	// span is the request's route span (zero when tracing is off), ctx
	// its context (nil before the span started): logs about the request
	// take it to carry the trace id.
	span   trace.Span
	ctx    context.Context
	denied string
	// grant is set when the routed tools/call may be granted to the edge
	// (proto.RouteGrant): it needed only the lookup and the placement.
	grant bool
}

// The kinds of switchyard_router_policy_denials_total.
const (
	policyTools     = "tools"
	policyPrompts   = "prompts"
	policyResources = "resources"
	policyUpstreams = "upstreams"
)

// viewKey names one tenant's list of one kind in one view ("" for the
// federated view, else an upstream's passthrough view). The policy pointer
// is part of the key: a tenant whose policy changed gets a new one (a
// tenancy snapshot keeps the pointer of a tenant whose record did not
// change), so an entry is never served under another policy.
type viewKey struct {
	tenant string
	pol    *policy.Policy
	kind   string
	view   string
}

// tlist is one tenant's list (a viewKey) over one catalog snapshot:
// the items the policy allows, and its pages rendered as the encoded
// proto.Reply the router sends, each on first use (a tenant that reads
// only the first page of a long list pays for that page only). Immutable
// once built but for the pages' first rendering, which is atomic.
type tlist struct {
	key     viewKey
	seq     uint64 // catalog.Snapshot.Seq it was built from
	bind    uint64 // cursor binding of (tenant, kind, view)
	result  string // result member: "tools", …
	hints   []byte
	entries []*catalog.Entry         // allowed items, sorted by Name
	size    int                      // items per page
	pages   []atomic.Pointer[[]byte] // pages[k]: the reply holding entries[k*size:], size items at most
	cursors map[string]int           // the nextCursor that leads to page k, for k >= 1
	bytes   int                      // memory it holds, roughly, for the cache's bound

	prev, next *tlist // the cache's LRU ring; guarded by viewCache.mu
}

// viewCache holds tenants' filtered, pre-rendered lists for the current
// catalog snapshot, built on first use and bounded by bytes (least
// recently used first out). A catalog snapshot newer than the entries
// empties it; entries of a policy that is no longer current are purged
// when the tenancy snapshot changes ([viewCache.purge]).
//
// A hit costs one mutex and one map lookup, whatever the list's size.
// Safe for concurrent use.
type viewCache struct {
	pageSize int
	maxBytes int
	lookup   func(hit bool) // if set, told of every lookup (metrics); set before use

	mu    sync.Mutex // guards the fields below
	seq   uint64     // catalog snapshot Seq of the entries
	m     map[viewKey]*tlist
	ring  tlist // sentinel: ring.next is the most recently used
	bytes int
}

func newViewCache(pageSize, maxBytes int) *viewCache {
	c := &viewCache{pageSize: pageSize, maxBytes: maxBytes, m: map[viewKey]*tlist{}}
	c.ring.prev, c.ring.next = &c.ring, &c.ring
	return c
}

// Errors of list requests. Each is shared: never modified once built.
var (
	errInvalidCursor = &proto.Error{Code: proto.CodeInvalidParams, Msg: "invalid cursor"}
)

// errUnknownUpstream answers a passthrough view of an upstream that is not
// in the catalog or that the tenant does not see: the same answer for both.
func errUnknownUpstream(view string) *proto.Error {
	return proto.Errorf(proto.CodeInvalidParams, "unknown upstream %q", view)
}

// page returns the encoded reply of the list of kind in view that sc's
// tenant sees, at cursor (nil: the first page). The result is shared and
// must not be modified. A view the tenant does not see is an unknown
// upstream; a cursor issued for another tenant, kind or view, or not by a
// router at all, is an invalid cursor.
func (c *viewCache) page(sc *scope, kind, view string, cursor []byte) ([]byte, *proto.Error) {
	v := sc.cat.List(kind, view)
	switch {
	case view != "" && (v == nil || !sc.pol.Upstream(view)):
		return nil, errUnknownUpstream(view)
	case v == nil:
		return nil, proto.Errorf(proto.CodeInternal, "router: no list of kind %q", kind) // listOps has only known kinds
	}
	l := c.get(sc, v, viewKey{tenant: sc.tenant, pol: sc.pol, kind: kind, view: view})
	if len(cursor) == 0 {
		return l.page(0), nil
	}
	if k, ok := l.cursors[string(cursor)]; ok {
		return l.page(k), nil
	}
	start, ok := l.after(cursor)
	if !ok {
		return nil, errInvalidCursor
	}
	return l.render(start, c.pageSize), nil
}

// get returns the list of key (v is its catalog view in sc.cat), from the
// cache or built now.
func (c *viewCache) get(sc *scope, v *catalog.View, key viewKey) *tlist {
	seq := sc.cat.Seq
	c.mu.Lock()
	if seq > c.seq {
		c.clear()
		c.seq = seq
	}
	if seq == c.seq {
		if l := c.m[key]; l != nil {
			c.unlink(l)
			c.pushFront(l)
			c.mu.Unlock()
			if c.lookup != nil {
				c.lookup(true)
			}
			return l
		}
	}
	c.mu.Unlock()
	if c.lookup != nil {
		c.lookup(false)
	}
	// Built outside the lock: a cold list of a thousand items takes a
	// while, and other tenants' hits must not wait for it. Two requests
	// may build the same list at once; the first one in is kept.
	l := build(sc, v, key, c.pageSize)
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq != c.seq || l.bytes > c.maxBytes {
		return l // an older snapshot's list, or too big to keep: served once
	}
	if old := c.m[key]; old != nil {
		return old
	}
	c.m[key] = l
	c.pushFront(l)
	c.bytes += l.bytes
	for c.bytes > c.maxBytes {
		c.evict(c.ring.prev)
	}
	return l
}

// purge drops the entries for which stale reports true.
func (c *viewCache) purge(stale func(viewKey) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, l := range c.m {
		if stale(k) {
			c.evict(l)
		}
	}
}

// len returns the number of cached lists and the bytes they hold.
func (c *viewCache) len() (n, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}

func (c *viewCache) clear() {
	clear(c.m)
	c.ring.prev, c.ring.next = &c.ring, &c.ring
	c.bytes = 0
}

func (c *viewCache) evict(l *tlist) {
	c.unlink(l)
	delete(c.m, l.key)
	c.bytes -= l.bytes
}

func (c *viewCache) unlink(l *tlist) {
	l.prev.next, l.next.prev = l.next, l.prev
	l.prev, l.next = nil, nil
}

func (c *viewCache) pushFront(l *tlist) {
	l.prev, l.next = &c.ring, c.ring.next
	c.ring.next.prev = l
	c.ring.next = l
}

// build filters v, the catalog view of key in sc.cat, by sc.pol and
// prepares its pages.
func build(sc *scope, v *catalog.View, key viewKey, size int) *tlist {
	l := &tlist{key: key, seq: sc.cat.Seq, bind: cursorBinding(key.tenant, key.kind, key.view)}
	l.result = v.ResultKey()
	pk := policy.Kind(key.kind)
	listed := v.Listed()
	l.entries = make([]*catalog.Entry, 0, len(listed))
	for _, e := range listed {
		if sc.pol.Allowed(pk, e.Upstream, e.Subject) {
			l.entries = append(l.entries, e)
		}
	}
	if key.view == "" {
		l.hints = sc.cat.FederatedHints(key.kind, sc.pol)
	} else {
		l.hints = v.PageHints()
	}
	n := max(1, (len(l.entries)+size-1)/size)
	l.size = size
	l.pages = make([]atomic.Pointer[[]byte], n)
	l.cursors = make(map[string]int, n-1)
	// Counted as if every page were rendered, so that the cache's bound
	// holds however many of them are.
	l.bytes = 256 + n*(128+len(l.hints))
	for _, e := range l.entries {
		l.bytes += 8 + len(e.JSON) + 1
	}
	for k := 1; k < n; k++ {
		cur := string(l.cursor(nil, l.entries[k*size-1].Name))
		l.cursors[cur] = k
		l.bytes += len(cur) + 16
	}
	return l
}

// page returns page k's reply, rendering it on first use.
func (l *tlist) page(k int) []byte {
	if p := l.pages[k].Load(); p != nil {
		return *p
	}
	b := l.render(k*l.size, l.size)
	l.pages[k].CompareAndSwap(nil, &b) // a concurrent first use may have won: same bytes
	return *l.pages[k].Load()
}

// render encodes the reply of the page of up to size items from start.
func (l *tlist) render(start, size int) []byte {
	start = min(start, len(l.entries))
	end := min(start+size, len(l.entries))
	var next []byte
	if end < len(l.entries) {
		next = l.cursor(nil, l.entries[end-1].Name)
	}
	es := l.entries[start:end]
	result := catalog.AppendPage(make([]byte, 0, catalog.PageLen(l.result, es, l.hints, next)), l.result, es, l.hints, next)
	data, err := proto.Marshal(&proto.Reply{Result: result})
	if err != nil {
		// Not expected: a Reply with a byte slice always encodes.
		data, _ = proto.Marshal(&proto.Reply{Error: proto.Errorf(proto.CodeInternal, "router: list not encoded")})
	}
	return data
}

// Cursors name the last item of the page they follow (so a change between
// pages neither repeats nor drops an item that exists throughout) and are
// bound to the tenant, list kind and view they were issued for: base64url
// of cursorTag, 8 bytes of cursorBinding, then the item's name. A cursor
// of another tenant, kind or view is refused like one no router issued.
const cursorTag = "sy2"

// cursor appends the cursor naming last.
func (l *tlist) cursor(dst []byte, last string) []byte {
	raw := make([]byte, 0, len(cursorTag)+8+len(last))
	raw = append(raw, cursorTag...)
	raw = binary.BigEndian.AppendUint64(raw, l.bind)
	raw = append(raw, last...)
	return base64.RawURLEncoding.AppendEncode(dst, raw)
}

// after returns the index of the first entry after the one cursor names;
// false for a cursor not issued for this list's tenant, kind and view.
func (l *tlist) after(cursor []byte) (int, bool) {
	var buf [256]byte
	raw, err := base64.RawURLEncoding.AppendDecode(buf[:0], cursor)
	if err != nil || len(raw) <= len(cursorTag)+8 || string(raw[:len(cursorTag)]) != cursorTag ||
		binary.BigEndian.Uint64(raw[len(cursorTag):]) != l.bind {
		return 0, false
	}
	last := string(raw[len(cursorTag)+8:])
	i, found := slices.BinarySearchFunc(l.entries, last, func(e *catalog.Entry, t string) int { return strings.Compare(e.Name, t) })
	if found {
		i++
	}
	return i, true
}

// cursorBinding is FNV-64a over the tokens, finalized (as bus.PlacementScore is): what
// ties a cursor to the tenant, kind and view it was issued for. It is no
// secret: it keeps a cursor from being honoured elsewhere, and a forged
// one can only position a tenant within its own list.
func cursorBinding(tenant, kind, view string) uint64 {
	return bus.PlacementScore(tenant, kind, view, cursorTag)
}

// listCursor returns the cursor of list params (nil when absent, null or
// empty) as a view of params where it can.
func listCursor(params []byte) ([]byte, *proto.Error) {
	var raw []byte
	if perr := paramMembers(params, func(i int, v []byte) {
		if i == fields.ParamCursor {
			raw = v
		}
	}); perr != nil {
		return nil, perr
	}
	switch {
	case raw == nil || string(raw) == "null":
		return nil, nil
	case raw[0] != '"':
		return nil, proto.Errorf(proto.CodeInvalidParams, "invalid params: cursor is not a string")
	case bytes.IndexByte(raw, '\\') < 0:
		return raw[1 : len(raw)-1], nil
	}
	return []byte(jsonscan.Unquote(raw)), nil
}
