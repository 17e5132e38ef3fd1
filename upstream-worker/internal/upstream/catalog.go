package upstream

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/capture"
)

// maxPages bounds one tool listing, against an upstream whose cursors never
// end.
const maxPages = 10000

// RefreshCatalog fetches the tool list now and stores it (op catalog). It
// fails with proto.CodeUpstreamUnavailable while the upstream is down.
func (u *Upstream) RefreshCatalog(ctx context.Context) *proto.Error {
	snap := u.snap.Load()
	if !snap.up {
		return u.unavailable(snap.err)
	}
	if err := u.refreshCatalog(ctx, snap.procs); err != nil {
		if ctx.Err() != nil {
			return proto.Errorf(proto.CodeTimeout, "upstream %s: tool list: %v", u.name, ctx.Err())
		}
		return u.unavailable("list tools: " + err.Error())
	}
	return nil
}

// refreshCatalog lists every tool through the pool session (HTTP) or the
// first process (stdio) and hands the set to the ToolStore.
func (u *Upstream) refreshCatalog(ctx context.Context, procs []*session) error {
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
	tools, err := listTools(ctx, cs)
	if err != nil {
		return err
	}
	if u.rawCalls && u.isHTTP() { // the Mcp-Param headers of raw HTTP calls
		b := paramBindings(tools)
		u.params.Store(&b)
	}
	set := &proto.ListSet{Upstream: u.name, Kind: proto.KindTools, Items: tools, Hash: hashTools(tools)}
	if err := u.opts.Tools.Store(ctx, set); err != nil {
		return fmt.Errorf("store tool set: %w", err)
	}
	u.log.Debug("tool list stored")
	return nil
}

// listTools follows nextCursor across pages and returns every tool as its
// raw JSON object, in the upstream's order.
func listTools(ctx context.Context, cs *mcp.ClientSession) ([][]byte, error) {
	var tools [][]byte
	seen := map[string]bool{}
	cursor := ""
	for range maxPages {
		page, next, err := listPage(ctx, cs, cursor)
		if err != nil {
			return nil, err
		}
		tools = append(tools, page...)
		if next == "" {
			return tools, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("tools/list: cursor %q repeats", next)
		}
		seen[next] = true
		cursor = next
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", maxPages)
}

// listPage fetches one page. The raw page is captured without a stub, so
// the SDK still decodes (and, for 2026-era sessions, caches) the typed
// result; a page served from that cache has no capture, so its typed tools
// are marshalled instead.
func listPage(ctx context.Context, cs *mcp.ClientSession, cursor string) ([][]byte, string, error) {
	slot := capture.NewSlot(nil)
	defer slot.Release()
	res, err := cs.ListTools(capture.With(ctx, slot), &mcp.ListToolsParams{Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	if raw, ok := slot.Result(); ok {
		var p struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, "", fmt.Errorf("tools/list result: %w", err)
		}
		out := make([][]byte, len(p.Tools))
		for i, t := range p.Tools {
			out[i] = t
		}
		return out, p.NextCursor, nil
	}
	out := make([][]byte, 0, len(res.Tools))
	for _, t := range res.Tools {
		b, err := json.Marshal(t)
		if err != nil {
			return nil, "", fmt.Errorf("tools/list: marshal cached tool: %w", err)
		}
		out = append(out, b)
	}
	return out, res.NextCursor, nil
}

// hashTools is FNV-64a over the length-prefixed tool objects.
func hashTools(tools [][]byte) uint64 {
	h := fnv.New64a()
	var n [8]byte
	for _, t := range tools {
		binary.BigEndian.PutUint64(n[:], uint64(len(t)))
		h.Write(n[:])
		h.Write(t)
	}
	return h.Sum64()
}
