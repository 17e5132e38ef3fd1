package proto

import (
	"errors"
	"strings"
)

// Subject prefixes and wildcards. Every subject is lowercase and carries the
// wire version "v1" as its second token; bump it on an incompatible change.
const (
	Prefix = "switchyard.v1."

	// SubjRouteAll is the routers' subscription (queue group [QueueRouter]).
	SubjRouteAll = Prefix + "route.*.*"
	// SubjRouterRouteAll matches every call sent to one router by name
	// (switchyard.v1.router.<router>.<tenant>.<op>; [AppendRouterRouteSubject]).
	SubjRouterRouteAll = Prefix + "router.*.*.*"
	// SubjEvtRouterAll matches every router heartbeat ([RouterHeartbeat]).
	SubjEvtRouterAll = Prefix + "evt.router.*"
	// SubjEvtWorkerAll matches every worker heartbeat.
	SubjEvtWorkerAll = Prefix + "evt.worker.*"
	// SubjEvtPresence asks every worker to publish a heartbeat now.
	SubjEvtPresence = Prefix + "evt.presence"
	// SubjEvtListChangedAll matches every list_changed event.
	SubjEvtListChangedAll = Prefix + "evt.list_changed.*"
	// SubjEvtSessionLevelAll matches every session_level event
	// ([SessionLevel]): a client session's log level changed on one edge,
	// for the others holding a copy of the session.
	SubjEvtSessionLevelAll = Prefix + "evt.session_level.*"
	// SubjEvtSessionCancelAll matches every edge's session_cancel events
	// ([EvtSessionCancelSubject]).
	SubjEvtSessionCancelAll = Prefix + "evt.session_cancel.*"
	// SubjEdgeMsgAll matches every edge's session-level message subject
	// ([EdgeMsgSubject]): each edge takes all of them, and delivers those
	// of the sessions whose stream it holds.
	SubjEdgeMsgAll = Prefix + "edge.*.msg"
	// SubjEvtSessionClosedAll matches every session_closed event.
	SubjEvtSessionClosedAll = Prefix + "evt.session_closed.*"
	// SubjEvtRoutes is published (empty body) by a router whenever what its
	// route grants ([RouteGrant]) were made from changed: the catalog, a
	// worker's presence or an upstream's state, or the tenancy snapshot.
	// Every edge drops the grants it holds.
	SubjEvtRoutes = Prefix + "evt.routes"

	// QueueRouter is the routers' queue group.
	QueueRouter = "router"

	// SubjTenancyAdmin is the prefix of tenancy-svc's admin endpoints
	// (tenants and API keys; JSON request-reply): <prefix>.tenant.put, ...
	SubjTenancyAdmin = Prefix + "tenancy.admin"
	// SubjTenancyResolve is the prefix of tenancy-svc's resolve endpoints
	// (API key, principal and access lookups).
	SubjTenancyResolve = Prefix + "tenancy.resolve"
	// SubjAudit is the first tokens of every audit event's subject
	// (switchyard.v1.audit.<tenant>.<upstream>.<outcome>.<name bucket>),
	// which the audit stream binds.
	SubjAudit = Prefix + "audit"
	// SubjBench is the prefix of the bench's own subjects (the bus floor's
	// echo responder).
	SubjBench = Prefix + "bench"
)

// KV bucket and stream names. Every bucket a role uses is named here, so
// that the bus's permission table ([AccessTable]) covers them all.
const (
	// BucketUpstreams is the catalog: key <upstream>, value [UpstreamSpec].
	// Written by tenancy-svc.
	BucketUpstreams = "switchyard_upstreams"
	// BucketLists holds every upstream's lists: key [ListKey], value
	// [ListSet]. Written by upstream-workers.
	BucketLists = "switchyard_lists"
	// BucketTenants holds the tenants (key: tenant name; msgpack
	// internal/tenancy.Tenant). Written by tenancy-svc.
	BucketTenants = "switchyard_tenants"
	// BucketAPIKeys holds the API keys, hashes only (key: key id).
	// Written by tenancy-svc.
	BucketAPIKeys = "switchyard_apikeys"
	// BucketTenancySeeded records what tenancy-svc seeded from its config
	// file (key: tenant.<name> | apikey.<id>, and "seeded" once done).
	BucketTenancySeeded = "switchyard_tenancy_seeded"
	// BucketKeys holds the fleet's shared secrets: the task id sealing key
	// (key "tasks") and the route grant MAC key (key "grants"). Created
	// by tenancy-svc; read by the roles that seal or verify.
	BucketKeys = "switchyard_keys"
	// KeyTasks is the task id sealing key in [BucketKeys].
	KeyTasks = "tasks"
	// KeyGrants is the route grant MAC key in [BucketKeys].
	KeyGrants = "grants"
	// BucketEdges lists the live edges (key: edge id), for fleet-wide
	// limit shares. Written and read by edges.
	BucketEdges = "switchyard_edges"
	// BucketSessions holds the stateful client sessions (key: session id;
	// value [SessionRecord]), so that any edge serves any session and a
	// session outlives its edge. Written and read by edges.
	BucketSessions = "switchyard_sessions"
	// DefaultAuditStream is the audit trail's JetStream stream unless the
	// config names another (audit.stream).
	DefaultAuditStream = "SWITCHYARD_AUDIT"
)

// KVStream is the JetStream stream that holds KV bucket b: "KV_<b>".
func KVStream(b string) string { return "KV_" + b }

// Buckets is every KV bucket of a deployment.
var Buckets = []string{BucketUpstreams, BucketLists, BucketTenants, BucketAPIKeys, BucketTenancySeeded, BucketKeys, BucketEdges, BucketSessions}

// ListKey is the key of an upstream's list of kind in [BucketLists]:
// "<upstream>.<kind>".
func ListKey(upstream, kind string) string { return upstream + "." + kind }

// ParseListKey splits a [BucketLists] key into its upstream and kind; ok is
// false for a key of another shape or an unknown kind.
func ParseListKey(key string) (upstream, kind string, ok bool) {
	i := strings.LastIndexByte(key, '.')
	if i <= 0 {
		return "", "", false
	}
	upstream, kind = key[:i], key[i+1:]
	for _, k := range ListKinds {
		if k == kind {
			return upstream, kind, true
		}
	}
	return "", "", false
}

// Ops: MCP methods as subject tokens.
const (
	OpToolsList             = "tools_list"
	OpToolsCall             = "tools_call"
	OpPromptsList           = "prompts_list"
	OpPromptsGet            = "prompts_get"
	OpResourcesList         = "resources_list"
	OpResourceTemplatesList = "resources_templates_list"
	OpResourcesRead         = "resources_read"
	OpResourcesSubscribe    = "resources_subscribe"
	OpResourcesUnsubscribe  = "resources_unsubscribe"
	OpCompletionComplete    = "completion_complete"
	OpLoggingSetLevel       = "logging_setlevel"
	// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663).
	OpTasksGet    = "tasks_get"
	OpTasksUpdate = "tasks_update"
	OpTasksCancel = "tasks_cancel"
	// OpCatalog asks a worker pool to refresh an upstream's list sets.
	OpCatalog = "catalog"
	// OpCancel cancels an in-flight call on a worker (body: [Cancel]).
	OpCancel = "cancel"
	// OpInFlight asks a worker which of the given calls it still runs
	// (body and answer: [InFlight]): an edge whose connection was
	// interrupted may have lost their replies.
	OpInFlight = "in_flight"
)

// ErrBadToken is returned by the subject builders for a token that would
// change the subject's shape.
var ErrBadToken = errors.New("proto: invalid subject token")

// ValidToken reports whether s can stand as one subject token: non-empty,
// no '.', '*', '>' , whitespace or control characters.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.', c == '*', c == '>', c <= ' ', c == 0x7f:
			return false
		}
	}
	return true
}

// ValidSlug reports whether s is a valid upstream, tenant, edge or worker
// name: 1-63 characters of [a-z0-9-], not starting or ending with '-' and
// without "__" (slugs are subject tokens and KV keys).
func ValidSlug(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// methodOps maps the MCP methods the gateway forwards to their ops.
var methodOps = map[string]string{
	"tools/list":               OpToolsList,
	"tools/call":               OpToolsCall,
	"prompts/list":             OpPromptsList,
	"prompts/get":              OpPromptsGet,
	"resources/list":           OpResourcesList,
	"resources/templates/list": OpResourceTemplatesList,
	"resources/read":           OpResourcesRead,
	"resources/subscribe":      OpResourcesSubscribe,
	"resources/unsubscribe":    OpResourcesUnsubscribe,
	"completion/complete":      OpCompletionComplete,
	"logging/setLevel":         OpLoggingSetLevel,
	"tasks/get":                OpTasksGet,
	"tasks/update":             OpTasksUpdate,
	"tasks/cancel":             OpTasksCancel,
}

// Op converts an MCP method to its subject token: "/" becomes "_" and the
// result is lowercase ("tools/call" -> "tools_call", "logging/setLevel" ->
// "logging_setlevel"). Known methods cost no allocation.
func Op(method string) string {
	if op, ok := methodOps[method]; ok {
		return op
	}
	return strings.ToLower(strings.ReplaceAll(method, "/", "_"))
}

// ForwardedOps returns the op of every method the gateway forwards, in no
// particular order.
func ForwardedOps() []string {
	out := make([]string, 0, len(methodOps))
	for _, op := range methodOps {
		out = append(out, op)
	}
	return out
}

// ForwardedOp returns the MCP method of a forwarded op; ok is false for an
// op no forwarded method has.
func ForwardedOp(op string) (method string, ok bool) {
	for m, o := range methodOps {
		if o == op {
			return m, true
		}
	}
	return "", false
}

// Forwarded reports whether the gateway forwards method (a client request)
// to an upstream, and its op.
func Forwarded(method string) (op string, ok bool) {
	op, ok = methodOps[method]
	return op, ok
}

func appendSubject(dst []byte, kind string, a, b string) ([]byte, error) {
	if !ValidToken(a) || (b != "" && !ValidToken(b)) {
		return dst, ErrBadToken
	}
	dst = append(dst, Prefix...)
	dst = append(dst, kind...)
	dst = append(dst, '.')
	dst = append(dst, a...)
	if b != "" {
		dst = append(dst, '.')
		dst = append(dst, b...)
	}
	return dst, nil
}

// AppendRouteSubject appends switchyard.v1.route.<tenant>.<op> to dst.
// It returns [ErrBadToken] if either token is invalid.
func AppendRouteSubject(dst []byte, tenant, op string) ([]byte, error) {
	if op == "" {
		return dst, ErrBadToken
	}
	return appendSubject(dst, "route", tenant, op)
}

// AppendRouterRouteSubject appends switchyard.v1.router.<router>.<tenant>.<op>
// to dst: a call sent to one router by name, which the router takes as one
// on its route subject (an edge that knows the live routers picks one, so
// that it knows which router holds each of its calls). It returns
// [ErrBadToken] if a token is invalid.
func AppendRouterRouteSubject(dst []byte, router, tenant, op string) ([]byte, error) {
	if !ValidToken(router) || !ValidToken(tenant) || !ValidToken(op) {
		return dst, ErrBadToken
	}
	dst = append(dst, Prefix...)
	dst = append(dst, "router."...)
	dst = append(dst, router...)
	dst = append(dst, '.')
	dst = append(dst, tenant...)
	dst = append(dst, '.')
	return append(dst, op...), nil
}

// RouterRouteSubjects is the subscription of router id's own calls.
func RouterRouteSubjects(router string) string { return Prefix + "router." + router + ".*.*" }

// EvtRouterSubject is the heartbeat subject of a router.
func EvtRouterSubject(router string) (string, error) {
	b, err := appendSubject(nil, "evt", "router", router)
	return string(b), err
}

// AppendWorkerSubject appends switchyard.v1.worker.<worker>.<op> to dst.
func AppendWorkerSubject(dst []byte, worker, op string) ([]byte, error) {
	if op == "" {
		return dst, ErrBadToken
	}
	return appendSubject(dst, "worker", worker, op)
}

// AppendPoolSubject appends switchyard.v1.pool.<upstream>.<op> to dst.
func AppendPoolSubject(dst []byte, upstream, op string) ([]byte, error) {
	if op == "" {
		return dst, ErrBadToken
	}
	return appendSubject(dst, "pool", upstream, op)
}

// AppendGrantSubject appends switchyard.v1.grant.<worker>.<op> to dst: a
// call an edge sends a worker itself on a route grant ([RouteGrant]),
// carrying the router's MAC of the grant ([HdrGrant]). Edges may publish
// here and not on the worker subjects, so a worker runs what an edge sends
// only with a grant a router made.
func AppendGrantSubject(dst []byte, worker, op string) ([]byte, error) {
	if op == "" {
		return dst, ErrBadToken
	}
	return appendSubject(dst, "grant", worker, op)
}

// GrantSubjectAll is a worker's subscription to the calls edges send it on
// route grants.
func GrantSubjectAll(worker string) (string, error) {
	b, err := appendSubject(nil, "grant", worker, "")
	return string(b) + ".*", err
}

// WorkerSubjectAll is the pinned-call subscription of one worker.
func WorkerSubjectAll(worker string) (string, error) {
	b, err := appendSubject(nil, "worker", worker, "")
	return string(b) + ".*", err
}

// PoolSubjectAll is a worker's subscription to one upstream's pool.
func PoolSubjectAll(upstream string) (string, error) {
	b, err := appendSubject(nil, "pool", upstream, "")
	return string(b) + ".*", err
}

// PoolQueue is the queue group of an upstream's pool.
func PoolQueue(upstream string) string { return "pool." + upstream }

// EvtWorkerSubject is the heartbeat subject of one worker.
func EvtWorkerSubject(worker string) (string, error) {
	b, err := appendSubject(nil, "evt", "worker", worker)
	return string(b), err
}

// EvtListChangedSubject is the list_changed event subject of a tenant.
func EvtListChangedSubject(tenant string) (string, error) {
	b, err := appendSubject(nil, "evt", "list_changed", tenant)
	return string(b), err
}

// EvtSessionClosedSubject is the session_closed event subject of an edge.
func EvtSessionClosedSubject(edge string) (string, error) {
	b, err := appendSubject(nil, "evt", "session_closed", edge)
	return string(b), err
}

// EdgeAnswerSubject is where another edge forwards a client's answer to a
// request edge relayed to it (the answer's POST reached the other edge):
// switchyard.v1.edge.<edge>.answer, headers [HdrSession] and [HdrRelay].
func EdgeAnswerSubject(edge string) (string, error) {
	b, err := appendSubject(nil, "edge", edge, "answer")
	return string(b), err
}

// EdgeResumeSubject is where another edge sends a 2026-07-28 client's
// follow-up to a call this edge suspended for the client's input (SEP-2322
// requestState; the follow-up's POST reached the other edge):
// switchyard.v1.edge.<edge>.resume, body [Resume]. The holding edge
// resumes the call, publishes the call's messages to [Resume.Inbox]+".m"
// and its outcome, a [Reply], to [Resume.Inbox]+".r".
func EdgeResumeSubject(edge string) (string, error) {
	b, err := appendSubject(nil, "edge", edge, "resume")
	return string(b), err
}

// SSEPostSubject is where an edge sends a legacy HTTP+SSE (2024-11-05)
// session's POST that reached it while another edge holds the session's
// GET stream: switchyard.v1.sse.<session>.post, the session being the
// SDK's sessionid of the POST endpoint. The holding edge subscribes while
// the stream is open, checks [HdrSSEOwner], hands the body to the session
// and replies with the HTTP status ([HdrHTTPStatus]) and body it answered.
func SSEPostSubject(session string) (string, error) {
	b, err := appendSubject(nil, "sse", session, "post")
	return string(b), err
}

// EvtSessionLevelSubject is the session_level event subject of an edge.
func EvtSessionLevelSubject(edge string) (string, error) {
	b, err := appendSubject(nil, "evt", "session_level", edge)
	return string(b), err
}

// EvtSessionCancelSubject is where edge sends a client's
// notifications/cancelled for a request no call of edge serves (the call
// runs at another edge holding the session, whose client's POSTs a load
// balancer spreads): switchyard.v1.evt.session_cancel.<edge>, body
// [SessionCancel]. The edge running the call cancels it as if the
// notification had reached it.
func EvtSessionCancelSubject(edge string) (string, error) {
	b, err := appendSubject(nil, "evt", "session_cancel", edge)
	return string(b), err
}

// EdgeMsgSubject is where workers send an edge the upstream messages that
// belong to one of its client sessions but to no call (header
// [HdrSession]; see [HdrMessage]): switchyard.v1.edge.<edge>.msg.
func EdgeMsgSubject(edge string) (string, error) {
	b, err := appendSubject(nil, "edge", edge, "msg")
	return string(b), err
}

// LastToken returns the last token of a subject ("" for an empty subject).
func LastToken(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}

// RouteTokens splits a route subject into its tenant and op tokens.
func RouteTokens(subject string) (tenant, op string, ok bool) {
	rest, ok := strings.CutPrefix(subject, Prefix+"route.")
	if !ok {
		// switchyard.v1.router.<router>.<tenant>.<op>
		if rest, ok = strings.CutPrefix(subject, Prefix+"router."); !ok {
			return "", "", false
		}
		var router string
		if router, rest, ok = strings.Cut(rest, "."); !ok || !ValidToken(router) {
			return "", "", false
		}
	}
	tenant, op, ok = strings.Cut(rest, ".")
	if !ok || !ValidToken(tenant) || !ValidToken(op) {
		return "", "", false
	}
	return tenant, op, true
}
