package upstream

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/capture"
)

// maxPages bounds one listing, against an upstream whose cursors never
// end.
const maxPages = 10000

// listKind is one catalogued list: a proto list kind, the method that
// lists it, the result member holding its items, whether the upstream's
// capabilities advertise it, and one typed page through the SDK client.
type listKind struct {
	bit        uint32
	kind       string
	method     string
	member     string
	advertised func(*mcp.ServerCapabilities) bool
	page       func(ctx context.Context, cs *mcp.ClientSession, cursor string) (items []any, next string, err error)
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
var listKinds = []listKind{
	{
		bit: bitTools, kind: proto.KindTools, method: "tools/list", member: "tools",
		advertised: func(c *mcp.ServerCapabilities) bool { return c.Tools != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]any, string, error) {
			res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return anys(res.Tools), res.NextCursor, nil
		},
	},
	{
		bit: bitPrompts, kind: proto.KindPrompts, method: "prompts/list", member: "prompts",
		advertised: func(c *mcp.ServerCapabilities) bool { return c.Prompts != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]any, string, error) {
			res, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return anys(res.Prompts), res.NextCursor, nil
		},
	},
	{
		bit: bitResources, kind: proto.KindResources, method: "resources/list", member: "resources",
		advertised: func(c *mcp.ServerCapabilities) bool { return c.Resources != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]any, string, error) {
			res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return anys(res.Resources), res.NextCursor, nil
		},
	},
	{
		bit: bitResourceTemplates, kind: proto.KindResourceTemplates, method: "resources/templates/list", member: "resourceTemplates",
		advertised: func(c *mcp.ServerCapabilities) bool { return c.Resources != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]any, string, error) {
			res, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return anys(res.ResourceTemplates), res.NextCursor, nil
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
func (u *Upstream) refreshCatalog(ctx context.Context, procs []*session, kinds uint32, notified bool) error {
	if kinds == 0 {
		return nil
	}
	u.catMu.Lock()
	defer u.catMu.Unlock()
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
		if k.advertised(caps) {
			var err error
			if items, err = listAll(ctx, cs, k); err != nil {
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
		set := &proto.ListSet{Upstream: u.name, Kind: k.kind, Items: items, Hash: hashItems(items)}
		if notified {
			set.Notified = time.Now().UnixNano()
		}
		if err := u.opts.Tools.Store(ctx, set); err != nil {
			return fmt.Errorf("store %s set: %w", k.kind, err)
		}
	}
	u.log.Debug("lists stored")
	return nil
}

// listAll follows nextCursor across pages and returns every item of kind
// as its raw JSON object, in the upstream's order.
func listAll(ctx context.Context, cs *mcp.ClientSession, k *listKind) ([][]byte, error) {
	items := [][]byte{}
	seen := map[string]bool{}
	cursor := ""
	for range maxPages {
		page, next, err := listPage(ctx, cs, k, cursor)
		if err != nil {
			return nil, err
		}
		items = append(items, page...)
		if next == "" {
			return items, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("%s: cursor %q repeats", k.method, next)
		}
		seen[next] = true
		cursor = next
	}
	return nil, fmt.Errorf("%s: more than %d pages", k.method, maxPages)
}

// listTools lists every tool (see listAll).
func listTools(ctx context.Context, cs *mcp.ClientSession) ([][]byte, error) {
	return listAll(ctx, cs, &listKinds[0])
}

// listPage fetches one page. The raw page is captured without a stub, so
// the SDK still decodes (and, for 2026-era sessions, caches) the typed
// result; a page served from that cache has no capture, so its typed items
// are marshalled instead.
func listPage(ctx context.Context, cs *mcp.ClientSession, k *listKind, cursor string) ([][]byte, string, error) {
	slot := capture.NewSlot(nil)
	defer slot.Release()
	typed, next, err := k.page(capture.With(ctx, slot), cs, cursor)
	if err != nil {
		return nil, "", err
	}
	if raw, ok := slot.Result(); ok {
		var res map[string]json.RawMessage
		var items []json.RawMessage
		next = ""
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, "", fmt.Errorf("%s result: %w", k.method, err)
		}
		if v, ok := res[k.member]; ok {
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, "", fmt.Errorf("%s result: %s: %w", k.method, k.member, err)
			}
		}
		if v, ok := res["nextCursor"]; ok {
			if err := json.Unmarshal(v, &next); err != nil {
				return nil, "", fmt.Errorf("%s result: nextCursor: %w", k.method, err)
			}
		}
		out := make([][]byte, len(items))
		for i, it := range items {
			out[i] = it
		}
		return out, next, nil
	}
	out := make([][]byte, 0, len(typed))
	for _, it := range typed {
		b, err := json.Marshal(it)
		if err != nil {
			return nil, "", fmt.Errorf("%s: marshal cached item: %w", k.method, err)
		}
		out = append(out, b)
	}
	return out, next, nil
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
