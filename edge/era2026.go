package edge

import (
	"bytes"
	"encoding/json"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// cacheableOps are the ops whose 2026-07-28 results must carry the
// SEP-2549 caching hints ttlMs and cacheScope.
var cacheableOps = map[string]bool{
	proto.OpToolsList: true, proto.OpPromptsList: true, proto.OpResourcesList: true,
	proto.OpResourceTemplatesList: true, proto.OpResourcesRead: true,
}

// upgrade2026 gives a result for a 2026-07-28 client the members that
// revision requires and a 2025-era upstream (or the router's list pages)
// does not set: resultType (SEP-2322) on every result ("input_required"
// when it carries inputRequests, as a 2025-era go-sdk server's multi-round
// tool answers, else "complete"), and on complete cacheable results ttlMs
// 0 and cacheScope "private" (SEP-2549: never stale-served, never shared),
// the safe values when nobody declared others. Members already present win. A result that is not an object is
// returned unchanged.
func upgrade2026(raw []byte, op string) []byte {
	body := bytes.TrimLeft(raw, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return raw
	}
	var hasType, hasTTL, hasScope, asks bool
	jsonscan.Members(body, func(k, _ []byte) {
		switch {
		case jsonscan.KeyIs(k, "resultType"):
			hasType = true
		case jsonscan.KeyIs(k, "inputRequests"):
			asks = true
		case jsonscan.KeyIs(k, "ttlMs"):
			hasTTL = true
		case jsonscan.KeyIs(k, "cacheScope"):
			hasScope = true
		}
	})
	add := make([]byte, 0, 64)
	switch {
	case !hasType && asks: // a 2025-era server's multi-round result (SEP-2322)
		add = append(add, `"resultType":"input_required",`...)
	case !hasType:
		add = append(add, `"resultType":"complete",`...)
	}
	if cacheableOps[op] && !asks {
		if !hasTTL {
			add = append(add, `"ttlMs":0,`...)
		}
		if !hasScope {
			add = append(add, `"cacheScope":"private",`...)
		}
	}
	if len(add) == 0 {
		return raw
	}
	rest := bytes.TrimLeft(body[1:], " \t\r\n")
	if len(rest) > 0 && rest[0] == '}' {
		add = add[:len(add)-1] // an empty object: no member follows
	}
	out := make([]byte, 0, len(raw)+len(add)+1)
	out = append(out, '{')
	out = append(out, add...)
	return append(out, rest...)
}

// serverInfoKey is the SEP-2575 _meta key a 2026-07-28 server identifies
// itself with on every result.
const serverInfoKey = "io.modelcontextprotocol/serverInfo"

// downgrade2025 removes from a result for a 2025-era client what a
// 2026-07-28 upstream session adds to every result (a shared stdio
// process negotiates the newer revision): resultType "complete" and the
// upstream's _meta serverInfo. Anything else, including an
// input_required result, is returned unchanged; results without either
// cost one scan.
func downgrade2025(raw []byte) []byte {
	if !bytes.Contains(raw, []byte(`"resultType"`)) && !bytes.Contains(raw, []byte(serverInfoKey)) {
		return raw
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return raw
	}
	changed := false
	if rt, ok := obj["resultType"]; ok && string(bytes.TrimSpace(rt)) == `"complete"` {
		delete(obj, "resultType")
		changed = true
	}
	if m, ok := obj["_meta"]; ok {
		var meta map[string]json.RawMessage
		if json.Unmarshal(m, &meta) == nil {
			if _, ok := meta[serverInfoKey]; ok {
				delete(meta, serverInfoKey)
				changed = true
				if len(meta) == 0 {
					delete(obj, "_meta")
				} else {
					obj["_meta"], _ = json.Marshal(meta)
				}
			}
		}
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return out
}
