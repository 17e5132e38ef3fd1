package edge

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

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
// upstream (v's own; in the federated view a tool's or prompt's name
// prefix, none for a resource), and for a call its kind and subject as
// the policy has them (a federated name, a URI).
func (s *Service) scopeCall(v *view, m *probeMsg) policy.Call {
	c := policy.Call{Upstream: v.name}
	if m == nil || len(m.Params) == 0 {
		return c
	}
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
		Ref  struct {
			Type string `json:"type"`
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"ref"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return c
	}
	named := func(k policy.Kind, name string) {
		c.Kind = k
		if v.name != "" {
			c.Subject = v.name + s.cfg.NameSeparator + name
			return
		}
		c.Subject = name
		if up, _, ok := strings.Cut(name, s.cfg.NameSeparator); ok {
			c.Upstream = up
		}
	}
	switch m.Method {
	case "tools/call":
		named(policy.KindTools, p.Name)
	case "prompts/get":
		named(policy.KindPrompts, p.Name)
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		c.Kind, c.Subject = policy.KindResources, p.URI
	case "completion/complete":
		switch p.Ref.Type {
		case "ref/prompt":
			named(policy.KindPrompts, p.Ref.Name)
		case "ref/resource":
			c.Kind, c.Subject = policy.KindResourceTemplates, p.Ref.URI
		}
	}
	return c
}
