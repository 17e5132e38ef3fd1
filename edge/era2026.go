package edge

import (
	"bytes"

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
// does not set: resultType "complete" (SEP-2322) on every result, and on
// cacheable results ttlMs 0 and cacheScope "private" (SEP-2549: never
// stale-served, never shared), the safe values when nobody declared
// others. Members already present win. A result that is not an object is
// returned unchanged.
func upgrade2026(raw []byte, op string) []byte {
	body := bytes.TrimLeft(raw, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return raw
	}
	var hasType, hasTTL, hasScope bool
	jsonscan.Members(body, func(k, _ []byte) {
		switch {
		case jsonscan.KeyIs(k, "resultType"):
			hasType = true
		case jsonscan.KeyIs(k, "ttlMs"):
			hasTTL = true
		case jsonscan.KeyIs(k, "cacheScope"):
			hasScope = true
		}
	})
	add := make([]byte, 0, 64)
	if !hasType {
		add = append(add, `"resultType":"complete",`...)
	}
	if cacheableOps[op] {
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
