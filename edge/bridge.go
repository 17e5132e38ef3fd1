package edge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// A 2026-07-28 client takes no server-to-client requests: a server that
// needs input answers tools/call, prompts/get or resources/read with an
// input_required result and the client calls again with inputResponses
// and the requestState it was given (SEP-2322). When a 2025-era upstream
// sends a request (elicitation, sampling, roots) during such a call, the
// edge suspends the call, keeps the bus call open, answers the client with
// an input_required result carrying that request, and when the client
// calls again with the matching requestState, sends its answer to the
// worker and waits for the rest of the same call.

// bridgePrefix starts the requestState of a call the edge suspended:
// sy-bridge:<edge>.<token>, the edge that holds the call and the
// suspension's token. Any edge that receives the follow-up resumes the
// call there (resumeAt); a state without an edge is this edge's.
const bridgePrefix = "sy-bridge:"

// inputKey is the key of the bridged request in inputRequests.
const inputKey = "sy-input"

// bridgeOps are the ops whose results may be input_required.
var bridgeOps = map[string]bool{proto.OpToolsCall: true, proto.OpPromptsGet: true, proto.OpResourcesRead: true}

// bridge remembers the request that suspended a call.
type bridge struct {
	asked *upMsg
	caps  []byte   // the client's declared capabilities (raw JSON object)
	s     *Service // for refusals
}

// inputCaps maps a request a server may ask a client to the capability
// the client must have declared for it (SEP-2322: a server asks only for
// input kinds the client declared).
var inputCaps = map[string]string{
	"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots",
}

// wrap returns a message callback that suspends the call on a request
// (for an op whose result may be input_required, of a kind the client
// declared; one it did not declare is refused) and hands everything else
// to next.
func (b *bridge) wrap(next func(*nats.Msg) bool, op string) func(*nats.Msg) bool {
	return func(m *nats.Msg) bool {
		u, ok := parseUpMsg(m)
		if !ok || u.id == nil || u.reply == "" || !bridgeOps[op] {
			return next(m)
		}
		if c, known := inputCaps[u.method]; known && !hasMember(b.caps, c) {
			b.s.refuse(u, "the client did not declare the "+c+" capability")
			return false
		}
		b.asked = u
		return true
	}
}

// hasMember reports whether the JSON object obj has member key.
func hasMember(obj []byte, key string) bool {
	found := false
	jsonscan.Members(obj, func(k, _ []byte) {
		if jsonscan.KeyIs(k, key) {
			found = true
		}
	})
	return found
}

// suspended is the error roundTrip returns for a call suspended for input.
type suspended struct {
	k        *bus.Call
	preq     proto.Request
	deadline time.Time
}

func (*suspended) Error() string { return "call suspended for the client's input" }

// suspension is a suspended call waiting for its client to call again.
// Only the caller that made it (same tenant, same identity user) may
// resume it, and it keeps the call's in-flight ticket: the call still
// runs at its worker.
type suspension struct {
	suspended
	asked   *upMsg
	timer   *time.Timer
	user    string // identity.user of the caller ("" anonymous)
	release func() // the call's limit ticket
}

// suspensions holds the suspended calls by token. Safe for concurrent use.
type suspensions struct {
	mu sync.Mutex
	m  map[string]*suspension // guarded by mu
}

func (t *suspensions) put(token string, sp *suspension) {
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]*suspension{}
	}
	t.m[token] = sp
	t.mu.Unlock()
}

func (t *suspensions) take(token string) *suspension {
	t.mu.Lock()
	defer t.mu.Unlock()
	sp := t.m[token]
	delete(t.m, token)
	return sp
}

// suspend parks sp until its deadline and returns the input_required
// result that asks the client for u.
//
// user is the caller's identity user and release its limit ticket, which
// the suspension holds until the call ends (resumed or timed out).
func (s *Service) suspend(sp *suspended, u *upMsg, user string, release func()) []byte {
	token := bus.RandomToken(20)
	sus := &suspension{suspended: *sp, asked: u, user: user, release: release}
	s.bridged.put(token, sus)
	sus.timer = time.AfterFunc(time.Until(sp.deadline), func() {
		if s.bridged.take(token) != nil {
			if sus.release != nil {
				sus.release()
			}
			sus.k.Close()
			s.cancelAtWorker(sus.k)
			s.refuse(u, "the client did not answer in time")
		}
	})
	b := make([]byte, 0, len(u.params)+len(u.method)+128)
	b = append(b, `{"resultType":"input_required","inputRequests":{"`+inputKey+`":{"method":`...)
	b = appendJSONString(b, u.method)
	if len(u.params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, u.params...)
	}
	b = append(b, `}},"requestState":`...)
	b = appendJSONString(b, bridgePrefix+s.cfg.ID+"."+token)
	return append(b, '}')
}

// bridgeRetry finds, in a call's params, the requestState of a call the
// edge suspended and the client's inputResponses.
func bridgeRetry(params []byte) (state string, responses []byte, ok bool) {
	jsonscan.Members(params, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "requestState"):
			if len(v) > 0 && v[0] == '"' {
				state = jsonscan.Unquote(v)
			}
		case jsonscan.KeyIs(k, "inputResponses"):
			responses = v
		}
	})
	return state, responses, strings.HasPrefix(state, bridgePrefix)
}

// stateEdge splits a bridge requestState (after bridgePrefix) into the
// edge holding the call ("" for this edge) and the suspension's token.
func stateEdge(state string) (edge, token string) {
	rest := strings.TrimPrefix(state, bridgePrefix)
	if e, t, ok := strings.Cut(rest, "."); ok {
		return e, t
	}
	return "", rest
}

// resume continues the suspended call named by state: the client's answer
// (inputResponses[inputKey]) goes to the worker, and the call is waited
// for again, with onMsg for its messages. The results are roundTrip's.
// A call another edge holds is resumed there (resumeAt), caps being the
// client's declared capabilities for the requests the upstream makes
// next.
//
// retry is the retried request (method, view and name as the client sent
// them): a requestState given to another request is refused and stays
// valid for its own. A requestState of another tenant or caller (user)
// reads exactly as one that does not exist. The suspension's limit
// ticket passes to *release, for the caller to end with the call.
func (s *Service) resume(ctx context.Context, state string, responses []byte, retry *proto.Request, user string, caps []byte, release *func(), onMsg func(*nats.Msg) bool) ([]byte, nats.Header, error) {
	edge, token := stateEdge(state)
	if edge != "" && edge != s.cfg.ID {
		raw, err := s.resumeAt(ctx, edge, &proto.Resume{
			Token: token, Tenant: retry.Tenant, User: user, Method: retry.Method, View: retry.View,
			Name: retry.Name, Responses: responses, Caps: caps,
		}, onMsg)
		return raw, nil, err
	}
	sus := s.bridged.take(token)
	if sus != nil && (sus.preq.Tenant != retry.Tenant || sus.user != user) {
		s.bridged.put(token, sus)
		sus = nil
	}
	if sus == nil {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown or expired requestState"}
	}
	if p := &sus.preq; p.Method != retry.Method || p.View != retry.View || p.Name != retry.Name {
		s.bridged.put(token, sus)
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState belongs to another request"}
	}
	sus.timer.Stop()
	*release = sus.release
	var answer []byte
	jsonscan.Members(responses, func(k, v []byte) {
		if jsonscan.KeyIs(k, inputKey) {
			answer = v
		}
	})
	if answer == nil {
		s.refuse(sus.asked, "the client gave no input response")
	} else if err := s.nc.Publish(sus.asked.reply, append(append([]byte(`{"jsonrpc":"2.0","id":0,"result":`), answer...), '}')); err != nil {
		s.log.Warn("answer not sent", proto.LogErr, err)
	}
	ctx, cancel := context.WithDeadline(ctx, sus.deadline.Add(timeoutGrace))
	defer cancel()
	out, err := sus.k.WaitWith(ctx, onMsg)
	if errors.Is(err, bus.ErrSuspended) {
		return nil, nil, &suspended{k: sus.k, preq: sus.preq, deadline: sus.deadline}
	}
	defer sus.k.Close()
	var note *callNote
	if s.audit != nil {
		note = noteOf(ctx)
	}
	raw, timing, err := s.replyOf(sus.k, out, err, nil, replyClock{}, note)
	switch {
	case err == nil:
		return raw, timing, nil
	case errors.Is(err, bus.ErrCanceled):
		return nil, nil, context.Cause(ctx)
	case err == proto.ErrTimeout: //nolint:errorlint // the bus's own sentinel: the edge waited out the call (a worker's timeout keeps its message)
		err = proto.Errorf(proto.CodeTimeout, "%s %s: no answer within %s", sus.preq.Method, sus.preq.Name, s.cfg.CallTimeout)
	}
	return nil, nil, s.toJSONRPC(ctx, err, sus.preq.Method)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}
