package upstream

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Client capabilities the worker declares upstream.
//
// A dedicated session (one client session) declares the capabilities its
// client declared (proto.Request.ClientCaps), so the upstream asks that
// client for exactly what it supports. A shared session (the HTTP pool, a
// stdio process) declares what the gateway can relay: elicitation (form
// and url), sampling and roots (without listChanged: clients' roots
// notifications are not forwarded); a relayed request that reaches a
// client without the capability gets the client's own error back. On a
// 2026-07-28 session capabilities travel in every request's _meta: there a
// request carries its own client's (req.ClientCaps, or a 2026 client's own
// clientCapabilities _meta member), else the session's.
//
// The SDK client is configured with Capabilities set and no sampling,
// elicitation or roots handlers (the receiving middleware, relay.go, takes
// those requests first), so it declares them as given: it infers nothing,
// and Capabilities.Roots is ignored for RootsV2 (go-sdk #607).

// sharedCaps is what a shared session declares.
func sharedCaps() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{
		RootsV2:  &mcp.RootCapabilities{},
		Sampling: &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{
			Form: &mcp.FormElicitationCapabilities{},
			URL:  &mcp.URLElicitationCapabilities{},
		},
	}
}

// parseCaps reads a client's capabilities object (raw JSON, as the client
// sent it); nil, invalid or not an object means none.
func parseCaps(raw []byte) *mcp.ClientCapabilities {
	var v2 struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &v2) != nil {
		return &mcp.ClientCapabilities{}
	}
	caps := v2.ClientCapabilities
	caps.RootsV2 = v2.Roots
	return &caps
}

// isObject reports whether raw is a JSON object.
func isObject(raw []byte) bool {
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// capsJSON encodes caps in the form the SDK sends in _meta (its "V2"
// form, whose roots member is RootsV2).
func capsJSON(caps *mcp.ClientCapabilities) []byte {
	v2 := struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}{*caps, caps.RootsV2}
	c, err := json.Marshal(&v2)
	if err != nil {
		panic(err)
	}
	return c
}

// newClient is the SDK client of one session s: it declares caps and
// routes the upstream's messages that reach the SDK (relay.go, receiving).
func (u *Upstream) newClient(caps *mcp.ClientCapabilities, s *session) *mcp.Client {
	c := mcp.NewClient(u.impl, &mcp.ClientOptions{
		Logger:                   u.log,
		Capabilities:             caps,
		ToolListChangedHandler:   func(context.Context, *mcp.ToolListChangedRequest) { u.markDirty(bitTools) },
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { u.markDirty(bitPrompts) },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			u.markDirty(bitResources | bitResourceTemplates)
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}, // results pass through raw
	})
	c.AddReceivingMiddleware(u.receiving(s))
	return c
}
