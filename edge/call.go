package edge

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/proto"
)

// rawResult is a result that is already JSON: the bytes from the bus go to
// the client without being decoded. Meta set by the SDK (serverInfo for
// 2026-era clients) is merged into the result's _meta.
type rawResult struct {
	mcp.ResultBase
	raw    json.RawMessage
	timing nats.Header // per-hop stamps of a traced call
}

// MarshalJSON returns the stored bytes, with any SDK-added _meta keys the
// upstream did not set itself.
func (r *rawResult) MarshalJSON() ([]byte, error) {
	if r.timing != nil {
		hop.Set(r.timing, hop.EdgeOut)
		if r.Meta == nil {
			r.Meta = mcp.Meta{}
		}
		r.Meta[hop.MetaKey] = hop.Relative(hop.Stamps(r.timing))
	}
	if len(r.Meta) == 0 {
		return r.raw, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(r.raw, &obj); err != nil {
		return r.raw, nil
	}
	meta := map[string]any{}
	if m, ok := obj["_meta"]; ok {
		_ = json.Unmarshal(m, &meta)
	}
	for k, v := range r.Meta {
		if _, ok := meta[k]; !ok {
			meta[k] = v
		}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return r.raw, nil
	}
	obj["_meta"] = b
	return json.Marshal(obj)
}

// middleware answers tools/list and tools/call of the view from the bus.
func (s *Service) middleware(view string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				return s.forward(ctx, view, method, proto.OpToolsList, "", req)
			case "tools/call":
				p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
				if !ok || p == nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
				}
				return s.forward(ctx, view, method, proto.OpToolsCall, p.Name, req)
			}
			return next(ctx, method, req)
		}
	}
}

// forward publishes one call and waits for its reply. Errors it returns
// are *jsonrpc.Error built by toJSONRPC, or the ctx's error when the client
// went away (the SDK then sends nothing).
func (s *Service) forward(ctx context.Context, view, method, op, name string, req mcp.Request) (mcp.Result, error) {
	var stamps nats.Header
	if op == proto.OpToolsCall && wantsTiming(req.GetParams()) {
		stamps = nats.Header{hop.Header: []string{"1"}}
		hop.Set(stamps, hop.EdgeIn)
	}
	params, err := json.Marshal(req.GetParams())
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params"}
	}
	sess := req.GetSession()
	preq := proto.Request{Method: method, Tenant: s.cfg.Tenant, Edge: s.cfg.ID, View: view, Name: name, Params: params}
	if ss, ok := sess.(*mcp.ServerSession); ok {
		preq.Session = ss.ID()
		if ip := ss.InitializeParams(); ip != nil {
			preq.Protocol = ip.ProtocolVersion
		}
	}
	deadline := time.Now().Add(s.cfg.CallTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	preq.DeadlineUnixMs = deadline.UnixMilli()
	// The worker gives up at the deadline and answers with an error naming
	// the upstream; the edge waits a little longer so that answer wins.
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(timeoutGrace))
	defer cancel()

	for attempt := 1; ; attempt++ {
		res, err := s.send(ctx, &preq, op, stamps)
		var pe *proto.Error
		if errors.As(err, &pe) && pe.Code == proto.CodeNotDelivered && attempt < maxAttempts {
			// It ran nowhere, so placing it again is safe; the pause lets the
			// router drop the worker that is gone.
			select {
			case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
				continue
			case <-ctx.Done():
			}
		}
		if err == nil {
			return res, nil
		}
		if errors.Is(err, bus.ErrCanceled) {
			return nil, context.Cause(ctx)
		}
		if errors.Is(err, proto.ErrTimeout) {
			err = proto.Errorf(proto.CodeTimeout, "%s %s: no answer within %s", method, name, s.cfg.CallTimeout)
		}
		return nil, s.toJSONRPC(err, method)
	}
}

// timeoutGrace is how long the edge waits past a call's deadline for the
// worker's own timeout answer.
const timeoutGrace = 500 * time.Millisecond

// maxAttempts bounds how often a call that reached no worker is placed again.
const maxAttempts = 4

// send publishes one attempt of a call and waits for its reply.
func (s *Service) send(ctx context.Context, preq *proto.Request, op string, stamps nats.Header) (mcp.Result, error) {
	if !s.nc.IsConnected() {
		// A publish would sit in the reconnect buffer until the deadline.
		return nil, proto.Errorf(proto.CodeUnavailable, "gateway bus unavailable (NATS %s)", s.nc.Status())
	}
	k := s.caller.New()
	defer k.Close()
	preq.ID = k.ID
	data, err := proto.Marshal(preq)
	if err != nil {
		return nil, err
	}
	if len(data) > int(s.nc.MaxPayload()) {
		return nil, proto.Errorf(proto.CodePayloadTooLarge, "request of %d bytes exceeds the bus limit of %d bytes", len(data), s.nc.MaxPayload())
	}
	msg := &nats.Msg{Subject: s.routeSub[op], Reply: k.Reply(), Data: data}
	if stamps != nil {
		msg.Header = nats.Header{}
		hop.Copy(msg.Header, stamps)
		hop.Set(msg.Header, hop.EdgePub)
	}
	if err := s.nc.PublishMsg(msg); err != nil {
		return nil, err
	}
	out, err := k.Wait(ctx)
	if errors.Is(err, bus.ErrCanceled) || errors.Is(err, proto.ErrTimeout) {
		s.cancelAtWorker(k)
	}
	if err != nil {
		return nil, err
	}
	var rep proto.Reply
	if err := proto.Unmarshal(out, &rep); err != nil {
		return nil, proto.Errorf(proto.CodeBadEnvelope, "undecodable reply: %v", err)
	}
	if rep.Error != nil {
		return nil, rep.Error
	}
	res := &rawResult{raw: rep.Result}
	if stamps != nil {
		h := k.Header()
		if h == nil {
			h = nats.Header{}
		}
		hop.Set(h, hop.EdgeRecv)
		res.timing = h
	}
	return res, nil
}

// wantsTiming reports whether the client asked for per-hop timings with
// _meta["dev.switchyard/timing"]: true.
func wantsTiming(p mcp.Params) bool {
	if p == nil {
		return false
	}
	v, _ := p.GetMeta()[hop.MetaKey].(bool)
	return v
}

// cancelAtWorker tells the worker that owns k to stop it; the worker then
// cancels the call upstream. Best effort: the reply, if any, is dropped.
func (s *Service) cancelAtWorker(k *bus.Call) {
	w := k.Worker()
	if w == "" {
		return
	}
	subj, err := proto.AppendWorkerSubject(nil, w, proto.OpCancel)
	if err != nil {
		return
	}
	data, err := proto.Marshal(&proto.Cancel{Edge: s.cfg.ID, ID: k.ID})
	if err == nil {
		err = s.nc.Publish(string(subj), data)
	}
	if err != nil {
		s.log.Warn("cancel not sent", proto.LogWorker, w, proto.LogErr, err)
	}
}

// toJSONRPC is the one place where errors become JSON-RPC errors.
func (s *Service) toJSONRPC(err error, method string) *jsonrpc.Error {
	var pe *proto.Error
	if errors.As(err, &pe) {
		je := &jsonrpc.Error{Code: int64(pe.Code), Message: pe.Msg}
		if len(pe.Data) > 0 {
			je.Data = json.RawMessage(pe.Data)
		}
		return je
	}
	id := bus.RandomToken(5)
	s.log.Error("internal error", proto.LogMethod, method, "correlation_id", id, proto.LogErr, err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error (correlation id " + id + ")"}
}
