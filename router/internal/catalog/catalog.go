// Package catalog builds the router's immutable views of every MCP list
// (tools, prompts, resources, resource templates) from the upstream catalog
// and the workers' list sets (KV bucket switchyard_lists), pages them, and
// finds the upstream of a federated name or a resource URI.
package catalog

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard-mcp/switchyard/internal/paramhdr"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/router/internal/names"
)

// Entry is one item (tool, prompt, resource or resource template) in a
// view. JSON is the object as clients see it (in the federated view, tools
// and prompts carry their federated names; URIs are never renamed).
type Entry struct {
	Name     string // name in this view
	Upstream string
	Orig     string // the upstream's own name
	// Subject is what a tenant's policy is matched on (internal/policy):
	// for tools and prompts the federated name clients see in the
	// federated view, also in a passthrough view (where Name is the
	// upstream's own); for resources the URI, for templates the URI
	// template (both equal to Name).
	Subject string
	JSON    []byte
	// Params are a tool's SEP-2243 parameter-header bindings (nil for most
	// tools, and for other kinds).
	Params []paramhdr.Binding
}

// View is one immutable list of tools: the federated view or one
// upstream's passthrough view.
type View struct {
	resultKey string            // "tools", "prompts", "resources" or "resourceTemplates"
	all       map[string]*Entry // every catalogued item, up or not
	listed    []*Entry          // items of upstreams that are up, sorted by Name
	hints     []byte            // `,"ttlMs":…,"cacheScope":"…"` for pages, or nil
	notified  int64             // latest upstream list_changed behind it (Unix ns)
}

func newView(spec kindSpec) *View {
	return &View{resultKey: spec.resultKey, all: map[string]*Entry{}}
}

// kindViews are the views of one list kind.
type kindViews struct {
	federated *View
	pass      map[string]*View
}

// Snapshot holds every view of every list kind. It is immutable once built
// and safe to share.
type Snapshot struct {
	// Federated and Pass are the tool views (also given by [Snapshot.List]).
	Federated *View
	Pass      map[string]*View
	lists     map[string]*kindViews
	templates []template // federated resource templates, in list order
	// passTemplates are every upstream's resource templates, up or not,
	// sorted by template: the fallback of [Snapshot.ResourceUpstream]
	// refuses the URIs of those a policy denies.
	passTemplates map[string][]template
	// Upstreams holds every upstream in the catalog, with or without tools.
	Upstreams map[string]bool
	// Seq orders the snapshots of one State: a later Build has a larger Seq.
	Seq         uint64
	sep         string
	passthrough map[string]bool             // upstreams whose spec forwards the client's Authorization (Auth.ForwardsClientAuth: passthrough, token exchange)
	isUp        map[string]bool             // as up() said at Build
	hints       map[string]map[string]Hints // kind -> upstream -> hints, as at Build
}

// UpstreamOf returns the catalog upstream visible to pol that a federated
// name belongs to by its "<upstream><sep>" prefix (the longest match), or
// "". Upstreams pol does not see are left out, as if they did not exist.
func (s *Snapshot) UpstreamOf(name string, pol *policy.Policy) string {
	best := ""
	for u := range s.Upstreams {
		if len(u) > len(best) && len(name) >= len(u)+len(s.sep) && strings.HasPrefix(name, u) &&
			strings.HasPrefix(name[len(u):], s.sep) && pol.Upstream(u) {
			best = u
		}
	}
	return best
}

// Passthrough reports whether upstream's spec asks for the client's
// Authorization header on its calls (proto.UpstreamAuth.ForwardsClientAuth:
// passthrough, or a token exchange at the worker).
func (s *Snapshot) Passthrough(upstream string) bool { return s.passthrough[upstream] }

// FederatedHints returns the page members carrying the caching hints of
// the federated list of kind as pol sees it: merged over the upstreams
// that were up at Build and that pol sees (see [State] merged); nil when
// none of them gave hints.
func (s *Snapshot) FederatedHints(kind string, pol *policy.Policy) []byte {
	ups := make([]string, 0, len(s.isUp))
	for u, up := range s.isUp {
		if up && pol.Upstream(u) && s.lists[kind] != nil && s.lists[kind].pass[u] != nil {
			ups = append(ups, u)
		}
	}
	return mergeHints(s.hints[kind], ups)
}

// ResultKey is the member of a list result holding the items: "tools",
// "prompts", "resources" or "resourceTemplates".
func (v *View) ResultKey() string { return v.resultKey }

// Listed returns the items of upstreams that are up, sorted by Name. The
// slice is shared: callers must not modify it.
func (v *View) Listed() []*Entry { return v.listed }

// PageHints returns the caching-hint members of the view's pages, or nil.
func (v *View) PageHints() []byte { return v.hints }

// Notified is the latest upstream list_changed behind the view (Unix ns).
func (v *View) Notified() int64 { return v.notified }

// cursorTag starts every cursor, so that a cursor this router did not
// issue is refused rather than read as a tool name.
const cursorTag = "sy1:"

// ErrBadCursor is returned by [View.Page] for a cursor it did not issue.
var ErrBadCursor = errors.New("catalog: invalid cursor")

// Lookup finds an item by its name (tools, prompts), URI (resources) or
// URI template (resource templates) in the view, whether or not its
// upstream is up.
func (v *View) Lookup(name string) (*Entry, bool) {
	e, ok := v.all[name]
	return e, ok
}

// Len is the number of listed tools.
func (v *View) Len() int { return len(v.listed) }

// Page returns a list result (tools/list, prompts/list, resources/list or
// resources/templates/list) as raw JSON: up to size items after
// cursor, and nextCursor when more follow. Cursors name the last tool
// returned, so a change between pages neither repeats nor drops a tool
// that exists throughout.
func (v *View) Page(cursor string, size int) ([]byte, error) {
	start := 0
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		last, ok := bytes.CutPrefix(raw, []byte(cursorTag))
		if err != nil || !ok || len(last) == 0 {
			return nil, ErrBadCursor
		}
		start, _ = slices.BinarySearchFunc(v.listed, string(last), func(e *Entry, t string) int { return strings.Compare(e.Name, t) })
		if start < len(v.listed) && v.listed[start].Name == string(last) {
			start++
		}
	}
	end := min(start+size, len(v.listed))
	var next []byte
	if end < len(v.listed) {
		next = base64.RawURLEncoding.AppendEncode(nil, []byte(cursorTag+v.listed[end-1].Name))
	}
	return AppendPage(nil, v.resultKey, v.listed[start:end], v.hints, next), nil
}

// PageLen is the length of the result [AppendPage] renders.
func PageLen(resultKey string, es []*Entry, hints, next []byte) int {
	n := len(`{"":[]}`) + len(resultKey) + len(hints)
	for _, e := range es {
		n += len(e.JSON) + 1
	}
	if next != nil {
		n += len(`,"nextCursor":""`) + len(next)
	}
	return n
}

// AppendPage appends a list result (the object of tools/list,
// prompts/list, resources/list or resources/templates/list) to dst: the
// items es under resultKey, then hints (caching-hint members, or nil),
// then nextCursor when next is not nil (next is the cursor as it goes
// on the wire, without quotes). It allocates only when dst lacks room.
func AppendPage(dst []byte, resultKey string, es []*Entry, hints, next []byte) []byte {
	b := dst
	b = append(b, `{"`...)
	b = append(b, resultKey...)
	b = append(b, `":[`...)
	for i, e := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.JSON...)
	}
	b = append(b, ']')
	b = append(b, hints...)
	if next != nil {
		b = append(b, `,"nextCursor":"`...)
		b = append(b, next...)
		b = append(b, '"')
	}
	return append(b, '}')
}

// Names returns the listed names, in order.
func (v *View) Names() []string {
	out := make([]string, len(v.listed))
	for i, e := range v.listed {
		out[i] = e.Name
	}
	return out
}

// kindSpec describes one list kind.
type kindSpec struct {
	key       string // member naming an item: "name", "uri" or "uriTemplate"
	resultKey string // member of the list result holding the items
	renamed   bool   // federated names are assigned by package names
}

var kinds = map[string]kindSpec{
	proto.KindTools:             {key: "name", resultKey: "tools", renamed: true},
	proto.KindPrompts:           {key: "name", resultKey: "prompts", renamed: true},
	proto.KindResources:         {key: "uri", resultKey: "resources"},
	proto.KindResourceTemplates: {key: "uriTemplate", resultKey: "resourceTemplates"},
}

type item struct {
	name   string
	raw    []byte
	fields map[string]json.RawMessage
}

// State accumulates the catalog (which upstreams exist) and their list
// sets. It is not safe for concurrent use: one goroutine owns it and
// publishes the snapshots it builds.
type State struct {
	sep       string
	upstreams map[string]bool
	pass      map[string]bool              // upstreams whose Auth.Passthrough is set
	lists     map[string]map[string][]item // kind -> upstream -> items
	hints     map[string]map[string]Hints  // kind -> upstream -> caching hints
	seq       uint64                       // Seq of the last Build
}

// Hints are an upstream's SEP-2549 caching hints on one list: TTLMs nil
// and Scope "" when it gave none. Notified is when the upstream last said
// the list changed (Unix ns, 0: never): a view whose Notified moved has
// changed even when its items did not.
type Hints struct {
	TTLMs    *int64
	Scope    string
	Notified int64
}

// NewState returns an empty state using sep between upstream and item names.
func NewState(sep string) *State {
	s := &State{sep: sep, upstreams: map[string]bool{}, pass: map[string]bool{}, lists: map[string]map[string][]item{}, hints: map[string]map[string]Hints{}}
	for k := range kinds {
		s.lists[k] = map[string][]item{}
		s.hints[k] = map[string]Hints{}
	}
	return s
}

// SetUpstream records that upstream exists in the catalog (or not).
// Removing it also clears its passthrough flag.
func (s *State) SetUpstream(name string, exists bool) {
	if exists {
		s.upstreams[name] = true
	} else {
		delete(s.upstreams, name)
		delete(s.pass, name)
	}
}

// SetPassthrough records whether upstream's spec sets
// proto.UpstreamAuth.Passthrough.
func (s *State) SetPassthrough(name string, on bool) {
	if on {
		s.pass[name] = true
	} else {
		delete(s.pass, name)
	}
}

// SetTools is SetList for proto.KindTools.
func (s *State) SetTools(upstream string, raw [][]byte) error {
	return s.SetList(proto.KindTools, upstream, raw)
}

// SetHints records an upstream's caching hints on its list of kind.
func (s *State) SetHints(kind, upstream string, h Hints) {
	if m := s.hints[kind]; m != nil {
		if h.TTLMs == nil && h.Scope == "" && h.Notified == 0 {
			delete(m, upstream)
		} else {
			m[upstream] = h
		}
	}
}

// ErrUnknownKind is returned by [State.SetList] for a kind it does not know.
var ErrUnknownKind = errors.New("catalog: unknown list kind")

// SetList replaces an upstream's list of kind with raw JSON objects; nil
// removes it. Objects without a string key member ("name", "uri" or
// "uriTemplate") or repeating one are skipped and reported.
func (s *State) SetList(kind, upstream string, raw [][]byte) error {
	spec, ok := kinds[kind]
	if !ok {
		return ErrUnknownKind
	}
	if raw == nil {
		delete(s.lists[kind], upstream)
		return nil
	}
	items := make([]item, 0, len(raw))
	var errs []error
	seen := map[string]bool{}
	for i, r := range raw {
		var f map[string]json.RawMessage
		var name string
		if err := json.Unmarshal(r, &f); err != nil {
			errs = append(errs, fmt.Errorf("%s %d: %w", kind, i, err))
			continue
		}
		if err := json.Unmarshal(f[spec.key], &name); err != nil || name == "" || seen[name] {
			errs = append(errs, fmt.Errorf("%s %d: missing, invalid or duplicate %s", kind, i, spec.key))
			continue
		}
		seen[name] = true
		items = append(items, item{name: name, raw: r, fields: f})
	}
	s.lists[kind][upstream] = items
	return errors.Join(errs...)
}

// Build makes a snapshot; up reports whether an upstream is serving.
func (s *State) Build(up func(upstream string) bool) *Snapshot {
	s.seq++
	snap := &Snapshot{Pass: map[string]*View{}, Upstreams: make(map[string]bool, len(s.upstreams)),
		Seq: s.seq, sep: s.sep, lists: make(map[string]*kindViews, len(kinds)),
		passthrough: make(map[string]bool, len(s.pass)), hints: make(map[string]map[string]Hints, len(kinds))}
	for u := range s.upstreams {
		snap.Upstreams[u] = true
		if s.pass[u] {
			snap.passthrough[u] = true
		}
	}
	isUp := make(map[string]bool, len(s.upstreams))
	for u := range s.upstreams {
		isUp[u] = up(u)
	}
	snap.isUp = isUp
	for kind, spec := range kinds {
		snap.lists[kind] = s.buildKind(kind, spec, isUp)
		snap.hints[kind] = maps.Clone(s.hints[kind])
	}
	tools := snap.lists[proto.KindTools]
	snap.Federated, snap.Pass = tools.federated, tools.pass
	tpls := snap.lists[proto.KindResourceTemplates]
	snap.passTemplates = make(map[string][]template, len(tpls.pass))
	for u, v := range tpls.pass {
		if len(v.all) == 0 {
			continue
		}
		es := slices.Collect(maps.Values(v.all))
		sortEntries(es)
		snap.passTemplates[u] = compileTemplates(es)
	}
	snap.templates = federatedTemplates(tpls.federated.listed, snap.passTemplates)
	return snap
}

// buildKind makes the federated and passthrough views of one kind.
func (s *State) buildKind(kind string, spec kindSpec, isUp map[string]bool) *kindViews {
	ups := make([]string, 0, len(s.lists[kind]))
	for u := range s.lists[kind] {
		if s.upstreams[u] {
			ups = append(ups, u)
		}
	}
	slices.Sort(ups) // the first upstream keeps a key two of them list
	var fed map[names.Pair]string
	if spec.renamed {
		var pairs []names.Pair
		for _, u := range ups {
			for _, it := range s.lists[kind][u] {
				pairs = append(pairs, names.Pair{Upstream: u, Tool: it.name})
			}
		}
		fed = names.Assign(pairs, s.sep)
	}
	kv := &kindViews{federated: newView(spec), pass: map[string]*View{}}
	for u := range s.upstreams {
		kv.pass[u] = newView(spec) // replaced below if it has a list
	}
	for _, u := range ups {
		items := s.lists[kind][u]
		pv := newView(spec)
		for _, it := range items {
			pe := &Entry{Name: it.name, Subject: it.name, Upstream: u, Orig: it.name, JSON: it.raw}
			if kind == proto.KindTools {
				pe.Params = paramhdr.Bindings(it.raw)
			}
			fe := pe
			if spec.renamed {
				pe.Subject = fed[names.Pair{Upstream: u, Tool: it.name}]
				fe = &Entry{Name: pe.Subject, Subject: pe.Subject, Upstream: u, Orig: it.name, Params: pe.Params}
				fe.JSON = rename(it.fields, fe.Name)
			}
			pv.all[pe.Name] = pe
			if _, dup := kv.federated.all[fe.Name]; !dup {
				kv.federated.all[fe.Name] = fe
				if isUp[u] {
					kv.federated.listed = append(kv.federated.listed, fe)
				}
			}
			if isUp[u] {
				pv.listed = append(pv.listed, pe)
			}
		}
		sortEntries(pv.listed)
		if isUp[u] {
			pv.hints = mergeHints(s.hints[kind], []string{u})
		}
		pv.notified = s.hints[kind][u].Notified
		kv.federated.notified = max(kv.federated.notified, pv.notified)
		kv.pass[u] = pv
	}
	sortEntries(kv.federated.listed)
	upUps := make([]string, 0, len(ups))
	for _, u := range ups {
		if isUp[u] {
			upUps = append(upUps, u)
		}
	}
	kv.federated.hints = mergeHints(s.hints[kind], upUps)
	return kv
}

// mergeHints returns the page members for the caching hints of a list
// merged from ups (upstreams that are up), by hs: the smallest ttlMs,
// counting an upstream without one as 0, and "public" only when every
// one said so; nil when none of them gave hints.
func mergeHints(hs map[string]Hints, ups []string) []byte {
	var ttl int64 = -1
	scope, any := "public", false
	for _, u := range ups {
		h := hs[u]
		ok := h.TTLMs != nil || h.Scope != ""
		any = any || ok
		t := int64(0)
		if h.TTLMs != nil && *h.TTLMs > 0 {
			t = *h.TTLMs
		}
		if ttl < 0 || t < ttl {
			ttl = t
		}
		if h.Scope != "public" {
			scope = "private"
		}
	}
	if !any {
		return nil
	}
	return []byte(`,"ttlMs":` + strconv.FormatInt(ttl, 10) + `,"cacheScope":"` + scope + `"`)
}

func sortEntries(es []*Entry) {
	slices.SortFunc(es, func(a, b *Entry) int { return strings.Compare(a.Name, b.Name) })
}

// rename returns the tool object with its name replaced.
func rename(f map[string]json.RawMessage, name string) []byte {
	c := make(map[string]json.RawMessage, len(f))
	for k, v := range f {
		c[k] = v
	}
	n, _ := json.Marshal(name)
	c["name"] = n
	b, _ := json.Marshal(c) // a map of raw messages that decoded always encodes
	return b
}

// List returns the view of kind for view ("" for the federated view, else
// an upstream's passthrough view); nil for an unknown upstream or kind.
func (s *Snapshot) List(kind, view string) *View {
	kv := s.lists[kind]
	if kv == nil {
		return nil
	}
	if view == "" {
		return kv.federated
	}
	return kv.pass[view]
}

// Changed returns the upstreams whose listed tools differ between a and b
// (a may be nil), sorted.
func Changed(a, b *Snapshot) []string { return ChangedKind(proto.KindTools, a, b) }

// ChangedKind returns the upstreams whose listed items of kind differ
// between a and b (a may be nil), sorted.
func ChangedKind(kind string, a, b *Snapshot) []string {
	var out []string
	seen := map[string]bool{}
	check := func(u string) {
		if seen[u] {
			return
		}
		seen[u] = true
		var va, vb *View
		if a != nil {
			va = a.List(kind, u)
		}
		vb = b.List(kind, u)
		if !sameListed(va, vb) {
			out = append(out, u)
		}
	}
	if a != nil {
		for u := range a.Upstreams {
			check(u)
		}
	}
	for u := range b.Upstreams {
		check(u)
	}
	slices.Sort(out)
	return out
}

func sameListed(a, b *View) bool {
	la, lb := 0, 0
	if a != nil {
		la = len(a.listed)
	}
	if b != nil {
		lb = len(b.listed)
	}
	if la != lb || (a != nil && b != nil && a.notified != b.notified) {
		return false
	}
	for i := 0; i < la; i++ {
		if a.listed[i].Name != b.listed[i].Name || !bytes.Equal(a.listed[i].JSON, b.listed[i].JSON) {
			return false
		}
	}
	return true
}
