// Package catalog builds the router's immutable tool views from the
// upstream catalog and the workers' tool sets, and pages them.
package catalog

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-mcp/switchyard/router/internal/names"
)

// Entry is one tool in a view. JSON is the tool object as clients see it
// (in the federated view, with its federated name).
type Entry struct {
	Name     string // name in this view
	Upstream string
	Orig     string // the upstream's own name
	JSON     []byte
}

// View is one immutable list of tools: the federated view or one
// upstream's passthrough view.
type View struct {
	all    map[string]*Entry // every catalogued tool, up or not
	listed []*Entry          // tools of upstreams that are up, sorted by Name
}

// Snapshot holds every view. It is immutable once built and safe to share.
type Snapshot struct {
	Federated *View
	Pass      map[string]*View
	// Upstreams holds every upstream in the catalog, with or without tools.
	Upstreams map[string]bool
	sep       string
}

// UpstreamOf returns the catalog upstream a federated name belongs to by
// its "<upstream><sep>" prefix (the longest match), or "".
func (s *Snapshot) UpstreamOf(name string) string {
	best := ""
	for u := range s.Upstreams {
		if len(u) > len(best) && strings.HasPrefix(name, u+s.sep) {
			best = u
		}
	}
	return best
}

// cursorTag starts every cursor, so that a cursor this router did not
// issue is refused rather than read as a tool name.
const cursorTag = "sy1:"

// ErrBadCursor is returned by [View.Page] for a cursor it did not issue.
var ErrBadCursor = errors.New("catalog: invalid cursor")

// Lookup finds a tool by its name in the view, whether or not its upstream
// is up.
func (v *View) Lookup(name string) (*Entry, bool) {
	e, ok := v.all[name]
	return e, ok
}

// Len is the number of listed tools.
func (v *View) Len() int { return len(v.listed) }

// Page returns a tools/list result as raw JSON: up to size tools after
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
	n := 32
	for _, e := range v.listed[start:end] {
		n += len(e.JSON) + 1
	}
	b := make([]byte, 0, n+64)
	b = append(b, `{"tools":[`...)
	for i, e := range v.listed[start:end] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.JSON...)
	}
	b = append(b, ']')
	if end < len(v.listed) {
		b = append(b, `,"nextCursor":"`...)
		b = base64.RawURLEncoding.AppendEncode(b, []byte(cursorTag+v.listed[end-1].Name))
		b = append(b, '"')
	}
	return append(b, '}'), nil
}

// Names returns the listed names, in order.
func (v *View) Names() []string {
	out := make([]string, len(v.listed))
	for i, e := range v.listed {
		out[i] = e.Name
	}
	return out
}

type tool struct {
	name   string
	raw    []byte
	fields map[string]json.RawMessage
}

// State accumulates the catalog (which upstreams exist) and their tool
// sets. It is not safe for concurrent use: one goroutine owns it and
// publishes the snapshots it builds.
type State struct {
	sep       string
	upstreams map[string]bool
	tools     map[string][]tool
}

// NewState returns an empty state using sep between upstream and tool names.
func NewState(sep string) *State {
	return &State{sep: sep, upstreams: map[string]bool{}, tools: map[string][]tool{}}
}

// SetUpstream records that upstream exists in the catalog (or not).
func (s *State) SetUpstream(name string, exists bool) {
	if exists {
		s.upstreams[name] = true
	} else {
		delete(s.upstreams, name)
	}
}

// SetTools replaces an upstream's tool set with raw JSON tool objects;
// nil removes it. Tools without a string name are skipped and reported.
func (s *State) SetTools(upstream string, raw [][]byte) error {
	if raw == nil {
		delete(s.tools, upstream)
		return nil
	}
	ts := make([]tool, 0, len(raw))
	var errs []error
	seen := map[string]bool{}
	for i, r := range raw {
		var f map[string]json.RawMessage
		var name string
		if err := json.Unmarshal(r, &f); err != nil {
			errs = append(errs, fmt.Errorf("tool %d: %w", i, err))
			continue
		}
		if err := json.Unmarshal(f["name"], &name); err != nil || name == "" || seen[name] {
			errs = append(errs, fmt.Errorf("tool %d: missing, invalid or duplicate name", i))
			continue
		}
		seen[name] = true
		ts = append(ts, tool{name: name, raw: r, fields: f})
	}
	s.tools[upstream] = ts
	return errors.Join(errs...)
}

// Build makes a snapshot; up reports whether an upstream is serving.
func (s *State) Build(up func(upstream string) bool) *Snapshot {
	var pairs []names.Pair
	for u, ts := range s.tools {
		if !s.upstreams[u] {
			continue
		}
		for _, t := range ts {
			pairs = append(pairs, names.Pair{Upstream: u, Tool: t.name})
		}
	}
	fed := names.Assign(pairs, s.sep)
	snap := &Snapshot{Federated: &View{all: make(map[string]*Entry, len(pairs))}, Pass: map[string]*View{},
		Upstreams: make(map[string]bool, len(s.upstreams)), sep: s.sep}
	for u := range s.upstreams {
		snap.Upstreams[u] = true
		snap.Pass[u] = &View{all: map[string]*Entry{}} // replaced below if it has tools
	}
	for u, ts := range s.tools {
		if !s.upstreams[u] {
			continue
		}
		isUp := up(u)
		pv := &View{all: make(map[string]*Entry, len(ts))}
		for _, t := range ts {
			pe := &Entry{Name: t.name, Upstream: u, Orig: t.name, JSON: t.raw}
			fe := &Entry{Name: fed[names.Pair{Upstream: u, Tool: t.name}], Upstream: u, Orig: t.name}
			fe.JSON = rename(t.fields, fe.Name)
			pv.all[pe.Name] = pe
			snap.Federated.all[fe.Name] = fe
			if isUp {
				pv.listed = append(pv.listed, pe)
				snap.Federated.listed = append(snap.Federated.listed, fe)
			}
		}
		sortEntries(pv.listed)
		snap.Pass[u] = pv
	}
	sortEntries(snap.Federated.listed)
	return snap
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

// Changed returns the upstreams whose listed tools differ between a and b
// (a may be nil), sorted.
func Changed(a, b *Snapshot) []string {
	var out []string
	seen := map[string]bool{}
	check := func(u string) {
		if seen[u] {
			return
		}
		seen[u] = true
		var va, vb *View
		if a != nil {
			va = a.Pass[u]
		}
		vb = b.Pass[u]
		if !sameListed(va, vb) {
			out = append(out, u)
		}
	}
	if a != nil {
		for u := range a.Pass {
			check(u)
		}
	}
	for u := range b.Pass {
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
	if la != lb {
		return false
	}
	for i := 0; i < la; i++ {
		if a.listed[i].Name != b.listed[i].Name || !bytes.Equal(a.listed[i].JSON, b.listed[i].JSON) {
			return false
		}
	}
	return true
}
