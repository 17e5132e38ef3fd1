package upstream

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/paramhdr"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/capture"
)

// maxPages bounds one listing, against an upstream whose cursors never
// end.
const maxPages = 10000

// listKind is one catalogued list: a proto list kind, the method that
// lists it, the result member holding its items, whether the upstream's
// capabilities advertise it, and one typed page through the SDK client
// (with the page's typed SEP-2549 caching fields).
type listKind struct {
	bit        uint32
	kind       string
	method     string
	member     string
	advertised func(*mcp.ServerCapabilities) bool
	page       func(ctx context.Context, cs *mcp.ClientSession, cursor string) (items []any, next string, c mcp.Cacheable, err error)
}

// Bits of [listKind.bit], for the kinds a list_changed marks dirty.
const (
	bitTools uint32 = 1 << iota
	bitPrompts
	bitResources
	bitResourceTemplates
	allKinds = bitTools | bitPrompts | bitResources | bitResourceTemplates
)

// listKinds are the catalogued lists, in proto.ListKinds order.
var listKinds = [...]listKind{
	{
		bit: bitTools, kind: proto.KindTools, method: "tools/list", member: "tools",
		advertised: func(c *mcp.ServerCapabilities) bool { return c.Tools != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]any, string, mcp.Cacheable, error) {
			res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				return nil, "", mcp.Cacheable{}, err
			}
			return anys(res.Tools), res.NextCursor, res.Cacheable, nil
		},
	},
	{
		bit: bitPrompts, kind: proto.KindPrompts, method: "prompts/list", member: "prompts",
		advertised: func(c *mcp.ServerCapabilities) bool { return c.Prompts != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]any, string, mcp.Cacheable, error) {
			res, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", mcp.Cacheable{}, err
			}
			return anys(res.Prompts), res.NextCursor, res.Cacheable, nil
		},
	},
	{
		bit: bitResources, kind: proto.KindResources, method: "resources/list", member: "resources",
		advertised: func(c *mcp.ServerCapabilities) bool { return c.Resources != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]any, string, mcp.Cacheable, error) {
			res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", mcp.Cacheable{}, err
			}
			return anys(res.Resources), res.NextCursor, res.Cacheable, nil
		},
	},
	{
		bit: bitResourceTemplates, kind: proto.KindResourceTemplates, method: "resources/templates/list", member: "resourceTemplates",
		advertised: func(c *mcp.ServerCapabilities) bool { return c.Resources != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]any, string, mcp.Cacheable, error) {
			res, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return nil, "", mcp.Cacheable{}, err
			}
			return anys(res.ResourceTemplates), res.NextCursor, res.Cacheable, nil
		},
	},
}

func anys[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// markDirty records that the upstream's lists of kinds changed and wakes
// the actor to refetch them (a list_changed notification).
func (u *Upstream) markDirty(kinds uint32) {
	u.dirty.Or(kinds)
	signal(u.kick)
}

// markExpired records that the gateway's copy of the lists of kinds
// outlived the upstream's ttlMs and wakes the actor to refetch them.
func (u *Upstream) markExpired(kinds uint32) {
	u.expired.Or(kinds)
	signal(u.kick)
}

// RefreshCatalog fetches every list now and stores them (op catalog). It
// fails with proto.CodeUpstreamUnavailable while the upstream is down or
// when the tool list or a store fails.
func (u *Upstream) RefreshCatalog(ctx context.Context) *proto.Error {
	snap := u.snap.Load()
	if !snap.up {
		return u.unavailable(snap.err)
	}
	if err := u.refreshCatalog(ctx, snap.procs, allKinds, false); err != nil {
		if ctx.Err() != nil {
			return proto.Errorf(proto.CodeTimeout, "upstream %s: catalog: %v", u.name, ctx.Err())
		}
		return u.unavailable("catalog: " + err.Error())
	}
	return nil
}

// refreshCatalog lists the kinds through the pool session (HTTP) or the
// first process (stdio) and hands each set to the ToolStore: a kind the
// upstream's capabilities do not advertise gets an empty set. A failure to
// list tools, or to store a set, is returned; a failure to list another
// kind is logged and leaves that kind's stored set as it was (an upstream
// whose resources/list is broken still serves its tools).
//
// notified says the refresh follows the upstream's list_changed: the sets
// are then stamped (proto.ListSet.Notified) and stored even when unchanged.
//
// Each listed kind's ttlMs refresh is rescheduled from its stored set's
// hint (or, when the kind was not stored, its previous one; see armTTL).
func (u *Upstream) refreshCatalog(ctx context.Context, procs []*session, kinds uint32, notified bool) error {
	if kinds == 0 {
		return nil
	}
	u.catMu.Lock()
	defer u.catMu.Unlock()
	u.holdTTL(kinds)
	defer u.armTTL(kinds)
	ctx, cancel := context.WithTimeout(ctx, u.opts.CatalogTimeout)
	defer cancel()
	var cs *mcp.ClientSession
	if u.isHTTP() {
		s, err := u.pool.get(ctx)
		if err != nil {
			return err
		}
		cs = s.cs
	} else {
		if len(procs) == 0 {
			return errors.New("no process")
		}
		cs = procs[0].cs
	}
	caps := &mcp.ServerCapabilities{}
	if ir := cs.InitializeResult(); ir != nil && ir.Capabilities != nil {
		caps = ir.Capabilities
	}
	for i := range listKinds {
		k := &listKinds[i]
		if kinds&k.bit == 0 {
			continue
		}
		items := [][]byte{}
		var hints cacheHints
		if k.advertised(caps) {
			var err error
			if items, hints, err = listAll(ctx, cs, k); err != nil {
				if k.bit == bitTools || ctx.Err() != nil {
					return fmt.Errorf("list %s: %w", k.kind, err)
				}
				u.log.Warn("list refresh failed", proto.LogMethod, k.method, proto.LogErr, err)
				continue
			}
		}
		if k.bit == bitTools && u.rawCalls && u.isHTTP() { // the Mcp-Param headers of raw HTTP calls
			b := paramBindings(items)
			u.params.Store(&b)
		}
		set := &proto.ListSet{Upstream: u.name, Kind: k.kind, Items: items, Hash: hashItems(items), TTLMs: hints.ttlMs, CacheScope: hints.scope}
		if notified {
			set.Notified = time.Now().UnixNano()
		}
		if err := u.opts.Tools.Store(ctx, set); err != nil {
			return fmt.Errorf("store %s set: %w", k.kind, err)
		}
		u.setTTL(i, hints.ttlMs)
	}
	u.log.Debug("lists stored")
	return nil
}

// minTTLRefresh is the shortest delay of a ttlMs refresh, so that a tiny
// (or zero-rounded) hint cannot make the worker list in a loop.
const minTTLRefresh = time.Second

// holdTTL stops the ttlMs refresh of kinds, which are being listed now
// (a refresh that already fired for them is absorbed by this listing).
// Called with catMu held.
func (u *Upstream) holdTTL(kinds uint32) {
	u.ttlMu.Lock()
	defer u.ttlMu.Unlock()
	for i := range listKinds {
		if t := u.ttlTimers[i]; t != nil && kinds&listKinds[i].bit != 0 {
			t.Stop()
		}
	}
	u.expired.And(^kinds)
}

// setTTL records the ttlMs hint of the set of listKinds[i] just stored
// (nil or <= 0: no refresh). Called with catMu held.
func (u *Upstream) setTTL(i int, ttlMs *int64) {
	var d time.Duration
	if ttlMs != nil && *ttlMs > 0 {
		d = time.Duration(min(*ttlMs, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
		d = max(d, minTTLRefresh)
	}
	u.ttlMu.Lock()
	u.ttls[i] = d
	u.ttlMu.Unlock()
}

// armTTL schedules the ttlMs refresh of every one of kinds whose stored
// set has a positive ttlMs, unless Run has returned. Called with catMu
// held.
func (u *Upstream) armTTL(kinds uint32) {
	u.ttlMu.Lock()
	defer u.ttlMu.Unlock()
	if u.ttlOff {
		return
	}
	for i := range listKinds {
		bit, d := listKinds[i].bit, u.ttls[i]
		if kinds&bit == 0 || d <= 0 {
			continue
		}
		if t := u.ttlTimers[i]; t != nil {
			t.Reset(d)
		} else {
			u.ttlTimers[i] = time.AfterFunc(d, func() { u.markExpired(bit) })
		}
	}
}

// stopTTL stops every ttlMs refresh: the upstream went down (the next
// connect lists everything and schedules them again) or, with off, Run
// returned (none is scheduled again).
func (u *Upstream) stopTTL(off bool) {
	u.ttlMu.Lock()
	defer u.ttlMu.Unlock()
	u.ttlOff = u.ttlOff || off
	for _, t := range u.ttlTimers {
		if t != nil {
			t.Stop()
		}
	}
	u.expired.Store(0)
}

// cacheHints are the SEP-2549 caching hints of a list result (one page or
// a whole list): ttlMs nil and scope "" when absent.
type cacheHints struct {
	ttlMs *int64
	scope string
}

// foldHints merges the hints of a list's pages: the smallest ttlMs, and
// "public" only if every page said so, else "private"; a page without
// ttlMs counts as 0, one without cacheScope as private (as the router
// counts an upstream without hints), but a member absent on every page
// stays absent.
func foldHints(pages []cacheHints) cacheHints {
	var out cacheHints
	if slices.ContainsFunc(pages, func(p cacheHints) bool { return p.ttlMs != nil }) {
		ttl := int64(math.MaxInt64)
		for _, p := range pages {
			t := int64(0)
			if p.ttlMs != nil {
				t = max(*p.ttlMs, 0)
			}
			ttl = min(ttl, t)
		}
		out.ttlMs = &ttl
	}
	if slices.ContainsFunc(pages, func(p cacheHints) bool { return p.scope != "" }) {
		out.scope = "public"
		for _, p := range pages {
			if p.scope != "public" {
				out.scope = "private"
			}
		}
	}
	return out
}

// listAll follows nextCursor across pages and returns every item of kind
// as its raw JSON object, in the upstream's order, and the list's caching
// hints (foldHints).
func listAll(ctx context.Context, cs *mcp.ClientSession, k *listKind) ([][]byte, cacheHints, error) {
	items := [][]byte{}
	var hints []cacheHints
	seen := map[string]bool{}
	cursor := ""
	for range maxPages {
		page, next, h, err := listPage(ctx, cs, k, cursor)
		if err != nil {
			return nil, cacheHints{}, err
		}
		items = append(items, page...)
		hints = append(hints, h)
		if next == "" {
			return items, foldHints(hints), nil
		}
		if seen[next] {
			return nil, cacheHints{}, fmt.Errorf("%s: cursor %q repeats", k.method, next)
		}
		seen[next] = true
		cursor = next
	}
	return nil, cacheHints{}, fmt.Errorf("%s: more than %d pages", k.method, maxPages)
}

// listTools lists every tool (see listAll).
func listTools(ctx context.Context, cs *mcp.ClientSession) ([][]byte, error) {
	items, _, err := listAll(ctx, cs, &listKinds[0])
	return items, err
}

// listPage fetches one page. The raw page is captured without a stub, so
// the SDK still decodes (and, for 2026-era sessions, caches) the typed
// result; a page served from that cache has no capture, so its typed items
// are marshalled instead, and its hints are the typed ones (the SDK caches
// only a page with a positive ttlMs).
func listPage(ctx context.Context, cs *mcp.ClientSession, k *listKind, cursor string) ([][]byte, string, cacheHints, error) {
	slot := capture.NewSlot(nil)
	defer slot.Release()
	typed, next, c, err := k.page(capture.With(ctx, slot), cs, cursor)
	if err != nil {
		return nil, "", cacheHints{}, err
	}
	if raw, ok := slot.Result(); ok {
		var res map[string]json.RawMessage
		var items []json.RawMessage
		next = ""
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, "", cacheHints{}, fmt.Errorf("%s result: %w", k.method, err)
		}
		if v, ok := res[k.member]; ok {
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, "", cacheHints{}, fmt.Errorf("%s result: %s: %w", k.method, k.member, err)
			}
		}
		if v, ok := res["nextCursor"]; ok {
			if err := json.Unmarshal(v, &next); err != nil {
				return nil, "", cacheHints{}, fmt.Errorf("%s result: nextCursor: %w", k.method, err)
			}
		}
		out := make([][]byte, len(items))
		for i, it := range items {
			out[i] = it
		}
		return out, next, rawHints(res), nil
	}
	out := make([][]byte, 0, len(typed))
	for _, it := range typed {
		b, err := json.Marshal(it)
		if err != nil {
			return nil, "", cacheHints{}, fmt.Errorf("%s: marshal cached item: %w", k.method, err)
		}
		out = append(out, b)
	}
	ttl := int64(c.TTLMs)
	return out, next, cacheHints{ttlMs: &ttl, scope: c.CacheScope}, nil
}

// rawHints reads the ttlMs and cacheScope members of a list result. A
// member that is not a number (ttlMs, rounded down; negative counts as 0)
// or not a string (cacheScope) is ignored, as if absent: hints are advice.
func rawHints(res map[string]json.RawMessage) cacheHints {
	var h cacheHints
	var f float64
	if v, ok := res["ttlMs"]; ok && string(v) != "null" && json.Unmarshal(v, &f) == nil {
		t := int64(0)
		if f > 0 {
			t = int64(min(math.Floor(f), math.MaxInt64/2))
		}
		h.ttlMs = &t
	}
	var s string
	if v, ok := res["cacheScope"]; ok && json.Unmarshal(v, &s) == nil {
		h.scope = s
	}
	return h
}

// paramBindings returns the SEP-2243 header bindings of every tool in
// tools (raw tool objects) that has valid annotations, by tool name (see
// package paramhdr): the raw HTTP path sends the Mcp-Param headers the
// SDK's streamable client would, taking the tool definitions from the
// catalog instead of the SDK session's tools/list cache.
func paramBindings(tools [][]byte) map[string][]paramhdr.Binding {
	var out map[string][]paramhdr.Binding
	for _, raw := range tools {
		b := paramhdr.Bindings(raw)
		if b == nil {
			continue
		}
		var t struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		if out == nil {
			out = map[string][]paramhdr.Binding{}
		}
		out[t.Name] = b
	}
	return out
}

// hashItems is FNV-64a over the length-prefixed items.
func hashItems(items [][]byte) uint64 {
	h := fnv.New64a()
	var n [8]byte
	for _, t := range items {
		binary.BigEndian.PutUint64(n[:], uint64(len(t)))
		h.Write(n[:])
		h.Write(t)
	}
	return h.Sum64()
}
