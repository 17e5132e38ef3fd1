package upstream

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// The reverse era bridge. On a 2026-07-28 session an upstream that needs
// the client's input (elicitation, sampling, roots) does not send a
// request: it answers tools/call, prompts/get or resources/read with an
// input_required result ({"resultType":"input_required","inputRequests":
// {key: {method, params}}, "requestState": ...}) and expects the same
// request again with "inputResponses": {key: result} and the
// "requestState" (SEP-2322). A 2026-era client does that itself, so its
// results pass through unchanged. A 2025-era client (proto.Request.Session
// set, Protocol before 2026-07-28) cannot: for it the worker asks each
// input request of the client as a server-to-client request through the
// call's relay, in order, and calls the upstream again with the answers,
// for at most maxInputRounds rounds, returning the final result. A client
// that answers an input request with an error fails the call with that
// error (inputResponses has no place for one).

// maxInputRounds bounds the rounds of one bridged call.
const maxInputRounds = 10

// bridged are the methods whose results may be input_required.
var bridged = map[string]bool{methodToolsCall: true, methodPromptsGet: true, methodRead: true}

// bridges reports whether a result of method on s must be bridged for st's
// client.
func (st *callState) bridges(s *session, method string) bool {
	if st == nil || st.relay == nil || st.req.Session == "" || st.req.Protocol >= protocol2026 || !bridged[method] {
		return false
	}
	return s.raw != nil && s.raw.meta != nil || s.pipe != nil && s.pipe.meta != nil
}

// bridge turns the upstream's input_required results (res, then each
// retry's) into relayed requests and retries, until a final result.
func (u *Upstream) bridge(ctx context.Context, s *session, p *rawParams, st *callState, res []byte) ([]byte, error) {
	for round := 0; ; round++ {
		requests, state, ok := inputRequired(res)
		if !ok {
			return res, nil
		}
		if round == maxInputRounds {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: fmt.Sprintf("upstream %s still requires input after %d rounds", u.name, maxInputRounds)}
		}
		responses, err := u.collectInput(ctx, st, requests)
		if err != nil {
			return nil, err
		}
		if res, err = u.rawOnce(ctx, s, p.withInput(responses, state), st); err != nil {
			return nil, err
		}
	}
}

// inputRequired reports whether res is an input_required result, with its
// inputRequests object and requestState (raw; nil when absent).
func inputRequired(res []byte) (requests, state []byte, ok bool) {
	jsonscan.Members(res, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "resultType"):
			ok = len(v) > 0 && v[0] == '"' && jsonscan.Unquote(v) == "input_required"
		case jsonscan.KeyIs(k, "inputRequests"):
			requests = v
		case jsonscan.KeyIs(k, "requestState"):
			state = v
		}
	})
	if isNull(state) {
		state = nil
	}
	return requests, state, ok
}

// collectInput asks st's client each input request ({key: {method,
// params}}) in order and returns the inputResponses object ({key:
// result}).
func (u *Upstream) collectInput(ctx context.Context, st *callState, requests []byte) ([]byte, error) {
	out := []byte{'{'}
	var err error
	jsonscan.Members(requests, func(k, v []byte) {
		if err != nil {
			return
		}
		var result []byte
		if result, err = u.askInput(ctx, st, v); err != nil {
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, k...), ':'), result...)
	})
	return append(out, '}'), err
}

// askInput asks st's client one input request ({method, params}) and
// returns its result.
func (u *Upstream) askInput(ctx context.Context, st *callState, ir []byte) ([]byte, error) {
	m := &upMsg{}
	jsonscan.Members(ir, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "method") && len(v) > 0 && v[0] == '"':
			m.method = jsonscan.Unquote(v)
		case jsonscan.KeyIs(k, "params") && !isNull(v):
			m.params = v
		}
	})
	if m.method == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream %s: input request without a method", u.name)}
	}
	m.id = strconv.AppendQuote(nil, "sy-input-"+strconv.FormatUint(u.progSeq.Add(1), 10))
	var res []byte
	var werr *jsonrpc.Error
	u.ask(ctx, st.relay, m, func(r []byte, e *jsonrpc.Error) { res, werr = r, e })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, werr
	}
	return res, nil
}

// withInput returns p with "inputResponses" and "requestState" (raw JSON;
// state may be nil) in place of any the client sent.
func (p *rawParams) withInput(responses, state []byte) *rawParams {
	q := *p
	m := make([]byte, 0, len(p.members)+len(responses)+len(state)+40)
	obj := append(append([]byte{'{'}, p.members...), '}')
	jsonscan.Members(obj, func(k, v []byte) {
		if jsonscan.KeyIs(k, "inputResponses") || jsonscan.KeyIs(k, "requestState") {
			return
		}
		if len(m) > 0 {
			m = append(m, ',')
		}
		m = append(append(append(m, k...), ':'), v...)
	})
	if len(m) > 0 {
		m = append(m, ',')
	}
	m = append(append(m, `"inputResponses":`...), responses...)
	if state != nil {
		m = append(append(m, `,"requestState":`...), bytes.TrimSpace(state)...)
	}
	q.members = m
	return &q
}

// The other direction. A 2026-era client's call that ran on a session
// before 2026-07-28 (a stateful upstream) may get the multi-round result
// an SDK server makes for older clients when its handler still needs
// input after the server asked the client itself: inputRequests and a
// requestState, without resultType. Marked input_required, it is one the
// client can answer: it calls again with inputResponses and the
// requestState, which the upstream's handler takes on any session.

// marksInput reports whether a result of method on s must be marked for
// st's client.
func (st *callState) marksInput(s *session, method string) bool {
	if st == nil || st.req.Protocol < protocol2026 || !bridged[method] || s.cs == nil {
		return false
	}
	ir := s.cs.InitializeResult()
	return ir != nil && ir.ProtocolVersion < protocol2026
}

// markInputRequired returns res with "resultType":"input_required" when it
// has inputRequests and no resultType; else res itself.
func markInputRequired(res []byte) []byte {
	if !bytes.Contains(res, []byte(`"inputRequests"`)) {
		return res
	}
	asks, typed := false, false
	jsonscan.Members(res, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "inputRequests"):
			asks = len(v) > 0 && v[0] == '{'
		case jsonscan.KeyIs(k, "resultType"):
			typed = true
		}
	})
	if !asks || typed {
		return res
	}
	i := bytes.IndexByte(res, '{') + 1
	out := make([]byte, 0, len(res)+32)
	out = append(append(out, res[:i]...), `"resultType":"input_required",`...)
	return append(out, res[i:]...)
}
