package edge

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/internal/policy"
)

// Required scopes (MCP authorization, "Scope Challenge Handling"; RFC
// 6750 section 3.1): a tenant's policy may require OAuth scopes of its
// callers for everything, for an upstream, or for matching tools, prompts
// and resources (policy.ScopeRule). A request whose caller lacks one gets
// HTTP 403 with a Bearer challenge naming the scopes the request needs
// (error="insufficient_scope", scope="..."), so that the client can ask
// its authorization server for a token that has them and try again; the
// body is a JSON-RPC error. Nothing reaches the bus. The check runs
// before the fast path and the SDK alike.

// scopesOK checks the scopes the tenant's policy requires of request r to
// view v (m its message, nil for a GET, a DELETE or a batch) and answers
// it when some are missing, reporting false.
func (s *Service) scopesOK(w http.ResponseWriter, r *http.Request, v *view, m *probeMsg) bool {
	id := identityOf(r.Context())
	if id == nil || !id.policy.HasScopeRules() {
		return true
	}
	if m == nil && r.Method == http.MethodPost && r.Body != nil {
		// A batch (2025-03-26): each of its messages is checked.
		body, err := io.ReadAll(r.Body) // precheck read it into memory
		if err != nil {
			return s.scopeCheck(w, r, v, id, nil)
		}
		setBody(r, body)
		msgs, _, ok := parseBody(body)
		if !ok || len(msgs) == 0 {
			return s.scopeCheck(w, r, v, id, nil)
		}
		for _, bm := range msgs {
			if bm != nil && !s.scopeCheck(w, r, v, id, bm) {
				return false
			}
		}
		return true
	}
	return s.scopeCheck(w, r, v, id, m)
}

// scopeCheck is scopesOK for one message m (nil: none) of caller id.
func (s *Service) scopeCheck(w http.ResponseWriter, r *http.Request, v *view, id *identity, m *probeMsg) bool {
	c := s.scopeCall(v, m)
	required := id.policy.RequiredScopes(c)
	missing := policy.Missing(required, id.scopes)
	if len(missing) == 0 {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+strings.Join(required, " ")+
		`", resource_metadata="`+s.resourceMetadataURL(r)+`", error_description="the token lacks scope `+strings.Join(missing, " ")+`"`)
	var msgID json.RawMessage
	method := ""
	if m != nil {
		method = m.Method
		if validID(m.ID) {
			msgID = m.ID
		}
	}
	s.met.AuthRefusal(http.StatusForbidden, "insufficient_scope")
	writeRPCError(w, http.StatusForbidden, msgID, int(jsonrpc.CodeInvalidRequest),
		"Forbidden: insufficient scope: this request needs "+strings.Join(missing, " "))
	s.refused(r, v, method, int64(jsonrpc.CodeInvalidRequest), time.Now())
	return false
}

// scopeCall is what the scope rules look at in a request to v: the
// upstream (v's own; in the federated view the longest catalog upstream
// a tool's or prompt's name starts with, as the router resolves it; none
// for a resource), and for a call its kind and subject as the policy has
// them (a federated name, a URI). The params are read in place, member by
// member (package jsonscan), so another member of an unexpected type
// cannot hide the name.
func (s *Service) scopeCall(v *view, m *probeMsg) policy.Call {
	c := policy.Call{Upstream: v.name}
	if m == nil || len(m.Params) == 0 {
		return c
	}
	var name, uri, refType, refName, refURI string
	str := func(val []byte) string {
		if len(val) > 0 && val[0] == '"' {
			return jsonscan.Unquote(val)
		}
		return ""
	}
	jsonscan.Members(m.Params, func(k, val []byte) {
		switch {
		case jsonscan.KeyIs(k, "name"):
			name = str(val)
		case jsonscan.KeyIs(k, "uri"):
			uri = str(val)
		case jsonscan.KeyIs(k, "ref"):
			jsonscan.Members(val, func(k, val []byte) {
				switch {
				case jsonscan.KeyIs(k, "type"):
					refType = str(val)
				case jsonscan.KeyIs(k, "name"):
					refName = str(val)
				case jsonscan.KeyIs(k, "uri"):
					refURI = str(val)
				}
			})
		}
	})
	named := func(k policy.Kind, name string) {
		c.Kind = k
		if v.name != "" {
			c.Subject = v.name + s.cfg.NameSeparator + name
			return
		}
		c.Subject = name
		c.Upstream = s.upstreamOf(name)
	}
	switch m.Method {
	case "tools/call":
		named(policy.KindTools, name)
	case "prompts/get":
		named(policy.KindPrompts, name)
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		c.Kind, c.Subject = policy.KindResources, uri
	case "completion/complete":
		switch refType {
		case "ref/prompt":
			named(policy.KindPrompts, refName)
		case "ref/resource":
			c.Kind, c.Subject = policy.KindResourceTemplates, refURI
		}
	}
	return c
}

// upstreamOf is the upstream of a federated name: the longest catalog
// upstream u such that name starts with u and the separator ("" if none).
func (s *Service) upstreamOf(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := ""
	for u := range s.upstreams {
		if len(u) > len(best) && strings.HasPrefix(name, u+s.cfg.NameSeparator) {
			best = u
		}
	}
	return best
}
