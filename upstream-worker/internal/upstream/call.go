package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/capture"
)

// callStub replaces a captured tools/call result for the SDK's typed
// decoder, which rejects unknown content types.
var callStub = []byte(`{"content":[]}`)

// callParams is the part of the client's tools/call params the worker
// forwards. Meta values stay raw JSON so they go upstream byte for byte.
type callParams struct {
	Name           string                     `json:"name"`
	Meta           map[string]json.RawMessage `json:"_meta"`
	Arguments      json.RawMessage            `json:"arguments"`
	InputResponses mcp.InputResponseMap       `json:"inputResponses"`
	RequestState   string                     `json:"requestState"`
}

// Call runs req (tools/call) on the upstream and returns the upstream's raw
// JSON result: an isError result is a result. The error, if any, is one of:
// the upstream's own JSON-RPC error (code, message, data unchanged);
// proto.CodeInvalidParams for params that are not a JSON object;
// proto.CodeUpstreamUnavailable when the upstream is down or the transport
// failed; proto.CodePayloadTooLarge when the response exceeds
// MaxResultBytes; proto.CodeTimeout when ctx's deadline passed; proto.CodeInternal when ctx was cancelled. Safe
// for concurrent use; it returns when ctx ends even if the upstream ignores
// the cancellation.
//
// On streamable HTTP and stdio upstreams the call bypasses the SDK client
// (rawCall, pipeCall); legacy SSE upstreams call through the SDK with a
// capture hook.
//
// With a [Relay] in ctx ([WithRelay]) the upstream's notifications and
// requests of the call reach its client (see the package doc, Relaying),
// the client's progress token goes upstream as one of ours, and a
// 2025-era client's input_required results are bridged (bridge.go).
func (u *Upstream) Call(ctx context.Context, req *proto.Request) ([]byte, *proto.Error) {
	st := u.beginCall(ctx, req)
	defer st.end()
	if u.rawCalls {
		rp, perr := newRawParams(req)
		if perr != nil {
			return nil, perr
		}
		rp.meta = st.rewriteMeta(rp.meta)
		rp.meta = trace.InjectMetaMembers(ctx, rp.meta)
		return u.send(ctx, req, st, func(ctx context.Context, s *session, l *lazy) ([]byte, error) {
			return u.callRawOn(ctx, s, l, rp, st)
		})
	}
	p, perr := u.callParams(req)
	if perr != nil {
		return nil, perr
	}
	if tok, ok := p.Meta["progressToken"].(json.RawMessage); ok && st.relay != nil && !isNull(tok) {
		p.Meta["progressToken"] = json.RawMessage(st.token(tok))
	}
	p.Meta = trace.InjectMetaMap(ctx, p.Meta)
	return u.send(ctx, req, st, func(ctx context.Context, s *session, l *lazy) ([]byte, error) {
		return u.callOn(ctx, s, l, p)
	})
}

// sendFunc runs one attempt of a request on session s (l is the lazy it
// came from, nil for a stdio process).
type sendFunc func(ctx context.Context, s *session, l *lazy) ([]byte, error)

// send runs call st (of req) on the session req picks, retrying once on a
// fresh session when the upstream forgot it, and converts the failure into
// its wire error (callError). While an attempt runs, st is in flight on its
// session (for the messages that name no call: see target).
func (u *Upstream) send(ctx context.Context, req *proto.Request, st *callState, attempt sendFunc) ([]byte, *proto.Error) {
	if u.exchange != nil {
		// The client's token, exchanged for the upstream's, before
		// anything is sent.
		var perr *proto.Error
		if ctx, perr = u.exchangeFor(ctx, req); perr != nil {
			return nil, perr
		}
	}
	for n := 0; ; n++ {
		s, l, perr := u.pick(ctx, req)
		if perr != nil {
			return nil, perr
		}
		s.noteAuth(ctx)
		if lv := requestLevel(req); lv != "" && s.cs != nil && legacySession(s) {
			// A 2026-era client's level, to a 2025-era upstream session.
			if err := u.ensureLevel(ctx, s, lv); err != nil {
				u.log.WarnContext(ctx, "log level not set on the upstream session", "level", lv, proto.LogErr, err)
			}
		}
		s.enter(st)
		res, err := attempt(ctx, s, l)
		s.leave(st)
		if err == nil {
			if st.marksInput(s, req.Method) {
				res = markInputRequired(res)
			}
			if req.Method == methodToolsCall {
				return u.mintTaskID(req, res)
			}
			return res, nil
		}
		if errors.Is(err, mcp.ErrSessionMissing) && l != nil && ctx.Err() == nil {
			l.drop(s)
			if n == 0 {
				u.log.DebugContext(ctx, "upstream session expired, reopening")
				continue
			}
		}
		return nil, u.callError(ctx, err, l)
	}
}

// callParams is the SDK path's form of the params of req (tools/call):
// the params newRawParams prepares for the raw paths (checked the same
// way, the upstream's tool name in place of the client's), decoded.
func (u *Upstream) callParams(req *proto.Request) (*mcp.CallToolParams, *proto.Error) {
	rp, perr := newRawParams(req)
	if perr != nil {
		return nil, perr
	}
	var p callParams
	if err := json.Unmarshal(rp.appendParams(nil, nil), &p); err != nil {
		return nil, invalidParams(methodToolsCall, "%s", decodeProblem(err))
	}
	args := p.Arguments
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = json.RawMessage("{}")
	}
	out := &mcp.CallToolParams{Name: p.Name, Arguments: args, InputResponses: p.InputResponses, RequestState: p.RequestState}
	for k, v := range p.Meta {
		if hopMeta[k] {
			continue
		}
		if out.Meta == nil {
			out.Meta = make(mcp.Meta, len(p.Meta))
		}
		out.Meta[k] = v
	}
	return out, nil
}

// hopMeta are the SEP-2575 per-request _meta keys. They describe the
// client's hop to the edge (its protocol version, identity, capabilities),
// not the worker's session to the upstream, which the SDK describes itself:
// forwarded, a 2026 client's protocolVersion would make a 2025 upstream
// reject the call.
var hopMeta = map[string]bool{
	mcp.MetaKeyProtocolVersion:    true,
	mcp.MetaKeyClientInfo:         true,
	mcp.MetaKeyClientCapabilities: true,
	mcp.MetaKeyLogLevel:           true,
	mcp.MetaKeySubscriptionID:     true,
}

// pick chooses the session for req; l is the lazy it came from (nil for a
// stdio process).
func (u *Upstream) pick(ctx context.Context, req *proto.Request) (*session, *lazy, *proto.Error) {
	snap := u.snap.Load()
	if !snap.up {
		return nil, nil, u.unavailable(snap.err)
	}
	if !u.isHTTP() {
		n := uint64(len(snap.procs))
		if n == 0 {
			return nil, nil, u.unavailable("no process")
		}
		i := u.rr.Add(1) % n
		if req.Session != "" {
			i = placement(req.Edge, req.Session) % n
		}
		return snap.procs[i], nil, nil
	}
	l := u.pool
	if req.Session != "" {
		var perr *proto.Error
		if l, perr = u.dedicatedFor(req.Edge, req.Session, req.ClientCaps); perr != nil {
			return nil, nil, perr
		}
	}
	s, err := l.get(ctx)
	if err != nil {
		return nil, nil, u.callError(ctx, err, nil)
	}
	return s, l, nil
}

// placement hashes a client session onto a stdio process.
func placement(edge, session string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(edge))
	h.Write([]byte{0})
	h.Write([]byte(session))
	return h.Sum64()
}

// callOn calls the tool on s and returns the captured raw result.
func (u *Upstream) callOn(ctx context.Context, s *session, l *lazy, p *mcp.CallToolParams) ([]byte, error) {
	if l != nil {
		defer l.use()()
	}
	slot := capture.NewSlot(callStub)
	defer slot.Release()
	p2 := *p // the SDK adds protocol _meta keys to the params it is given
	if p.Meta != nil {
		p2.Meta = make(mcp.Meta, len(p.Meta))
		for k, v := range p.Meta {
			p2.Meta[k] = v
		}
	}
	hop.Mark(ctx, hop.UpSent)
	res, err := s.cs.CallTool(capture.With(ctx, slot), &p2)
	hop.Mark(ctx, hop.UpRecv)
	if err != nil {
		return nil, err
	}
	if raw, ok := slot.Result(); ok {
		return raw, nil
	}
	// Not captured (it cannot happen with the SDK's transports); the typed
	// result is the best there is.
	return json.Marshal(res)
}

// callRawOn sends the request p of call st on s (a streamable HTTP or
// stdio session) without the SDK client, bridging input_required results
// for a 2025-era client (bridge).
func (u *Upstream) callRawOn(ctx context.Context, s *session, l *lazy, p *rawParams, st *callState) ([]byte, error) {
	if l != nil {
		defer l.use()()
	}
	hop.Mark(ctx, hop.UpSent)
	res, err := u.rawOnce(ctx, s, p, st)
	if err == nil && st.bridges(s, p.method) {
		res, err = u.bridge(ctx, s, p, st, res)
	}
	hop.Mark(ctx, hop.UpRecv)
	return res, err
}

// rawOnce sends the request p of call st on s once.
func (u *Upstream) rawOnce(ctx context.Context, s *session, p *rawParams, st *callState) ([]byte, error) {
	switch {
	case s.raw != nil:
		return u.rawCall(ctx, s.raw, p, st)
	case s.pipe != nil:
		return u.pipeCall(ctx, s.pipe, p)
	}
	// Cannot happen: rawCalls is only set where sessions have one.
	return nil, errors.New("session without a raw call path")
}

// callError converts a failed call into its wire error. A transport error
// on the pool session asks the actor to ping now; on a dedicated session it
// drops that session, so the next call opens a fresh one. A response over
// MaxResultBytes (raw path) leaves the session alone.
func (u *Upstream) callError(ctx context.Context, err error, l *lazy) *proto.Error {
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(cerr, context.DeadlineExceeded) {
			return proto.Errorf(proto.CodeTimeout, "upstream %s: call deadline exceeded", u.name)
		}
		return proto.Errorf(proto.CodeInternal, "call to upstream %s cancelled", u.name)
	}
	if werr := upstreamError(err); werr != nil {
		code := werr.Code
		if code < math.MinInt32 || code > math.MaxInt32 {
			code = int64(proto.CodeInternal)
		}
		return &proto.Error{Code: int32(code), Msg: werr.Message, Data: werr.Data}
	}
	var tl *tooLargeError
	if errors.As(err, &tl) { // the session is fine
		return proto.Errorf(proto.CodePayloadTooLarge, "upstream %s: %s", u.name, tl.Error()) // tl's text only: err's wrappers may name the URL
	}
	var le *limitError
	if errors.As(err, &le) { // the process is restarted by supervision
		return proto.Errorf(proto.CodeUpstreamUnavailable, "upstream %s: its process hit its sandbox limit %s (%d) and is being restarted",
			u.name, le.limit, le.value)
	}
	if errors.Is(err, errNoResponse) || strings.Contains(err.Error(), errNoResponse.Error()) {
		// One call's response stream closed early (the raw path's error,
		// or the SDK's synthetic one, same text): the session, and the
		// other calls on it, are fine.
		return proto.Errorf(proto.CodeUpstreamUnavailable,
			"upstream %s ended the call's response stream without answering it (the call may have run)", u.name)
	}
	switch {
	case l == u.pool:
		signal(u.check)
	case l != nil:
		if s := l.current(); s != nil {
			l.drop(s)
		}
	}
	// The transport's error names the upstream's URL and addresses: it
	// goes to the log under a correlation id the client is given.
	id := bus.RandomToken(5)
	u.log.WarnContext(ctx, "upstream call failed", "correlation_id", id, proto.LogErr, err)
	return proto.Errorf(proto.CodeUpstreamUnavailable, "upstream %s is unavailable (%s; correlation id %s)",
		u.name, bus.UnavailableReason(err.Error()), id)
}

// localErrors are the SDK's own jsonrpc errors (jsonrpc2.ErrRejected,
// ErrClientClosing, ErrServerClosing): they report the transport, not the
// upstream, and are matched by code and message since the sentinels are
// internal to the SDK.
var localErrors = map[int64]string{
	-32005: "rejected by transport",
	-32003: "client is closing",
	-32004: "server is closing",
}

// upstreamError returns the JSON-RPC error the upstream answered with, or
// nil when err did not come from the upstream. (When an HTTP error body
// carries a JSON-RPC error, the SDK wraps it before ErrRejected, so
// errors.As finds the upstream's.)
func upstreamError(err error) *jsonrpc.Error {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		return nil
	}
	if msg, ok := localErrors[werr.Code]; ok && werr.Message == msg {
		return nil
	}
	return werr
}
