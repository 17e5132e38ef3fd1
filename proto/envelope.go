package proto

// Request is a call from an edge, forwarded by a router to one worker.
//
// The edge fills Method, Tenant, Edge, Session, View, Protocol,
// Principal, Issuer, Params and DeadlineUnixMs; the router adds Upstream
// and Name (the upstream's own name of the tool) and forwards it unchanged
// otherwise. Params is the MCP params
// object as raw JSON, exactly as the client sent it (with the client's name
// of the tool in it); it is never re-modelled.
type Request struct {
	Method   string `msgpack:"m"`
	Tenant   string `msgpack:"t,omitempty"`
	Edge     string `msgpack:"e,omitempty"`
	Session  string `msgpack:"s,omitempty"` // client session id; "" for a stateless (2026-era) call
	View     string `msgpack:"v,omitempty"` // "" for the federated view, else the passthrough upstream
	Upstream string `msgpack:"u,omitempty"` // set by the router
	Name     string `msgpack:"n,omitempty"` // set by the router: the upstream's tool name
	Protocol string `msgpack:"p,omitempty"` // the client's protocol version
	// Principal is who the edge authenticated the call as within Tenant:
	// an API key's principal, a JWT's sub claim, or "" for an anonymous
	// request. Set by the edge; for limits, audit and the scope of the
	// call's tasks (internal/taskid).
	Principal string `msgpack:"a,omitempty"`
	// Issuer is the JWT issuer ("iss") of Principal, "" for an API key or
	// an anonymous request: two issuers may use one sub, so (Issuer,
	// Principal) names the caller. Set by the edge; workers seal task ids
	// to it. Absent from edges that predate it.
	Issuer string `msgpack:"q,omitempty"`
	Params []byte `msgpack:"j,omitempty"` // raw JSON params
	// ClientCaps is the client's capabilities object from its initialize
	// (raw JSON), set by the edge for calls of a 2025-era session: a worker
	// opening an upstream session for that client session declares them,
	// so the upstream may ask it for sampling, elicitation or roots.
	ClientCaps []byte `msgpack:"c,omitempty"`
	// ID is the edge's id of this call, unique per edge; cancellation uses it.
	ID uint64 `msgpack:"i,omitempty"`
	// DeadlineUnixMs is when the edge stops waiting (Unix milliseconds); 0 means none.
	DeadlineUnixMs int64 `msgpack:"d,omitempty"`
	// Grant is the route grant token ([RouteGrant.Token]) of a call an
	// edge sends a worker itself (subject switchyard.v1.grant.<worker>.
	// tools_call): the worker runs it only if the token's MAC grants
	// Tenant, Upstream and Name and has not expired (internal/grant).
	// Empty on every other message.
	Grant []byte `msgpack:"g,omitempty"`
}

// Reply answers a [Request]: exactly one of Result (raw JSON result) and
// Error is set. Worker names the worker that served the call, if any.
//
// A reply larger than the connection's max payload travels in chunks (see
// [HdrChunk]); the receiver reassembles them before decoding.
type Reply struct {
	Result []byte `msgpack:"r,omitempty"`
	Error  *Error `msgpack:"x,omitempty"`
	Worker string `msgpack:"w,omitempty"`
	// Upstream is the catalog name ([UpstreamSpec.Name]) of the upstream
	// the call was dispatched to, for the audit trail. The worker sets it
	// on every reply to a call it dispatched: a result, an error (the
	// upstream's or its own), and an admission refusal (overloaded,
	// shutting down: the call was meant for that upstream). It is "" on
	// replies built by a router or an edge, on a worker's replies to
	// messages it did not dispatch (undecodable, unknown op, upstream not
	// served, cancels), and from workers that predate the field.
	Upstream string `msgpack:"u,omitempty"`
	// ServiceNs is the worker's own time on the call, in nanoseconds: from
	// admitting it to having its answer, the span the worker's
	// switchyard_upstream_request_duration_seconds histogram observes, so
	// neither the bus nor the router is in it. The worker sets it with
	// Upstream (a refusal's is just the admission check); it is 0 where
	// Upstream is "". Read on the worker's monotonic clock: never negative.
	ServiceNs int64 `msgpack:"d,omitempty"`
}

// Resume is a 2026-07-28 client's follow-up to a suspended call, sent by
// the edge the follow-up reached to the edge holding the call
// ([EdgeResumeSubject]). The holding edge checks Tenant, User, Method,
// View and Name against the call it suspended, as for a follow-up it
// received itself.
type Resume struct {
	// Token is the suspension's token: the requestState after
	// "sy-bridge:<edge>.".
	Token  string `msgpack:"t"`
	Tenant string `msgpack:"n"`
	// User is the caller's identity user ("" anonymous).
	User   string `msgpack:"u,omitempty"`
	Method string `msgpack:"m"`
	View   string `msgpack:"v,omitempty"`
	Name   string `msgpack:"a,omitempty"`
	// Responses is the follow-up's inputResponses (a JSON object).
	Responses []byte `msgpack:"r,omitempty"`
	// Caps is the client's declared capabilities (a JSON object), for the
	// requests the upstream may make while the call goes on.
	Caps []byte `msgpack:"c,omitempty"`
	// Inbox is the receiving edge's inbox for the call: messages on
	// Inbox+".m", the outcome on Inbox+".r".
	Inbox string `msgpack:"i"`
}

// Cancel asks a worker to cancel the edge's call ID (subject
// switchyard.v1.worker.<worker>.cancel).
type Cancel struct {
	Edge string `msgpack:"e"`
	ID   uint64 `msgpack:"i"`
}

// InFlight names calls by the keys workers know them by (Request.Edge and
// Request.ID): an edge's question on switchyard.v1.worker.<w>.in_flight,
// and the worker's answer: Calls keeps those it still runs, Resent those
// it finished lately and whose kept reply it has just sent again (to the
// subject the first went to). A call in neither never reached the worker
// (it may be sent again), unless Unsure is set (the worker could not keep
// every recent reply, so such a call may have run) or Backlog is (calls
// wait in the worker's subscriptions unread: such a call may be among
// them, and run yet).
//
// A worker keeps each reply [ReplyKeepMs] milliseconds: a call it finished
// earlier than that reads as never seen, so an edge places again only
// calls younger than that. Boot is the answering worker's
// ([Heartbeat.Boot]): an answer from another process under the same id
// (a restart) says nothing of the calls the first one took.
type InFlight struct {
	Calls   []Cancel `msgpack:"c"`
	Resent  []Cancel `msgpack:"r,omitempty"`
	Unsure  bool     `msgpack:"u,omitempty"`
	Backlog bool     `msgpack:"b,omitempty"`
	Boot    int64    `msgpack:"o,omitempty"`
}

// ReplyKeepMs is how long a worker keeps a reply it sent, to send it again
// when asked ([InFlight]), in milliseconds.
const ReplyKeepMs = 10_000

// Heartbeat is a worker's presence message on switchyard.v1.evt.worker.<id>.
// Workers send one every IntervalMs milliseconds, on request
// ([SubjEvtPresence]), and a final one with Bye set when they stop. Receivers
// consider a worker gone after [HeartbeatMisses] intervals without one.
type Heartbeat struct {
	Worker     string `msgpack:"w"`
	Boot       int64  `msgpack:"b"` // start time, Unix nanoseconds: tells a restart apart
	IntervalMs int32  `msgpack:"i"`
	InFlight   int32  `msgpack:"f,omitempty"`
	// Reconnects counts the worker's NATS reconnects: when it changes,
	// messages sent to the worker meanwhile may have been lost, and edges
	// ask it about the calls they wait on ([InFlight]).
	Reconnects uint64          `msgpack:"n,omitempty"`
	Upstreams  []UpstreamState `msgpack:"u,omitempty"`
	Bye        bool            `msgpack:"y,omitempty"`
	// Draining says the worker is stopping: it takes no new call and
	// finishes those it has, then says Bye. Receivers place nothing more
	// on it (its upstreams count as down) but keep it alive, so its
	// calls in flight are not failed.
	Draining bool `msgpack:"r,omitempty"`
}

// RouterHeartbeat is a router's liveness, published on
// switchyard.v1.evt.router.<router> every IntervalMs while it takes calls
// on its own subject ([AppendRouterRouteSubject]), and once with Bye set
// when it stops taking them. An edge counts a router gone after
// [HeartbeatMisses] intervals without one, or at its Bye, and sends the
// calls that router held and had not placed to another router.
type RouterHeartbeat struct {
	Router     string `msgpack:"r"`
	Boot       int64  `msgpack:"b"` // start time, Unix nanoseconds
	IntervalMs int32  `msgpack:"i"`
	Bye        bool   `msgpack:"y,omitempty"`
	// Draining says the router is stopping: it places what it was sent
	// and says Bye; edges send it nothing new meanwhile.
	Draining bool `msgpack:"d,omitempty"`
	// Backlog says calls were queued at the router, or being handled,
	// when it sent this heartbeat. One without it tells an edge that every
	// call the router had received by then has been placed or answered.
	Backlog bool `msgpack:"k,omitempty"`
}

// RouteGrant lets an edge route later tools/call requests of one tool in
// one view of one tenant itself. A router puts it in the body of the
// placement note ([HdrPlaced]) of a tools/call it routed when the call
// needed nothing from the router but the lookup: the tool has no SEP-2243
// parameter headers and its upstream takes no client Authorization.
//
// The edge sends such a call as the router would have: Request.Upstream =
// Upstream, Request.Name = Name, Request.Grant = Token, to
// switchyard.v1.grant.<w>.tools_call
// where w is Workers[bus.Place(Workers, edge, session, Upstream, rr)]
// (rendezvous by session, round-robin without one). A grant is void after
// the edge's route cache TTL, when any router publishes on
// [SubjEvtRoutes], and for a worker that the edge sees leave or that
// answers no-responders.
type RouteGrant struct {
	Upstream string   `msgpack:"u"`
	Name     string   `msgpack:"n"` // the upstream's own name of the tool
	Workers  []string `msgpack:"w"` // the live workers serving Upstream, in the router's order
	// Token is the router's MAC of (tenant, Upstream, Name, expiry) with
	// the fleet's grant key (internal/grant): the edge sends it in
	// [Request.Grant], and workers refuse a granted call without a valid
	// one, so an edge's credentials reach no tool a router did not grant.
	Token []byte `msgpack:"k,omitempty"`
}

// HeartbeatMisses is how many heartbeat intervals may pass before a worker
// is considered gone.
const HeartbeatMisses = 3

// UpstreamState is one upstream as a worker sees it.
type UpstreamState struct {
	Name string `msgpack:"n"`
	Up   bool   `msgpack:"u,omitempty"`
	Err  string `msgpack:"e,omitempty"` // why it is down, for operators
}

// Transport kinds of an upstream.
const (
	TransportStreamable = "streamable"
	TransportSSE        = "sse"
	TransportStdio      = "stdio"
)

// UpstreamSpec is one upstream server in the catalog (KV bucket
// [BucketUpstreams], key Name), owned by tenancy-svc.
type UpstreamSpec struct {
	Name      string            `msgpack:"n"`
	Transport string            `msgpack:"t"`           // TransportStreamable, TransportSSE or TransportStdio
	URL       string            `msgpack:"u,omitempty"` // HTTP transports
	Command   []string          `msgpack:"c,omitempty"` // stdio: argv
	Env       map[string]string `msgpack:"v,omitempty"` // stdio: its environment, beside a minimal base
	// InheritEnv names the worker's variables a stdio server gets as they are.
	InheritEnv []string `msgpack:"ie,omitempty"`
	// Sandbox confines a stdio server (docs/sandbox.md); nil: only the
	// defaults (scrubbed environment, process group).
	Sandbox *Sandbox `msgpack:"sb,omitempty"`
	// Processes is how many processes of a stdio upstream each worker runs.
	Processes int `msgpack:"p,omitempty"`
	// CallTimeoutMs bounds one call to this upstream; 0 means the gateway default.
	CallTimeoutMs int64 `msgpack:"o,omitempty"`
	// MaxMessageBytes bounds one message a stdio server writes, in bytes;
	// 0 means the worker's max result size.
	MaxMessageBytes int64 `msgpack:"m,omitempty"`
	// Auth is how the worker authenticates to an HTTP upstream; nil: it
	// sends no credentials.
	Auth *UpstreamAuth `msgpack:"a,omitempty"`
}

// UpstreamAuth is the credentials of an HTTP upstream. Secrets never
// travel on the bus or sit in KV: the spec names an environment variable
// or a file that each worker reads itself (so a worker serving the
// upstream needs them in its environment or on its filesystem).
//
// A client's own Authorization header is never sent upstream unless
// Passthrough is set: then the header of the client's request reaches the
// upstream (see [HdrAuthorization]) and replaces any injected
// Authorization; the worker's own requests (connecting, listing) use the
// injected credentials.
type UpstreamAuth struct {
	// BearerEnv / BearerFile hold a token sent as "Authorization: Bearer
	// <token>" (at most one of them; whitespace around it trimmed).
	BearerEnv  string `msgpack:"be,omitempty"`
	BearerFile string `msgpack:"bf,omitempty"`
	// Headers are static headers, each value from a variable or a file.
	Headers []HeaderSource `msgpack:"h,omitempty"`
	// Passthrough forwards the client's Authorization header on the
	// client's calls.
	Passthrough bool `msgpack:"p,omitempty"`
	// TokenExchange, if set, sends on the client's calls a token minted
	// for the upstream in exchange for the client's (RFC 8693); the edge
	// forwards the client's Authorization as for Passthrough.
	TokenExchange *TokenExchange `msgpack:"x,omitempty"`
}

// Sandbox is how a worker confines a stdio server's processes: a working
// directory, another uid and gid (0: the worker's), resource limits (0:
// none) and Landlock filesystem rules (none: no rules).
type Sandbox struct {
	Workdir     string   `msgpack:"d,omitempty"`
	UID         uint32   `msgpack:"u,omitempty"`
	GID         uint32   `msgpack:"g,omitempty"`
	MemoryBytes uint64   `msgpack:"m,omitempty"`
	OpenFiles   uint64   `msgpack:"f,omitempty"`
	Processes   uint64   `msgpack:"p,omitempty"`
	CPUSeconds  uint64   `msgpack:"c,omitempty"`
	ReadOnly    []string `msgpack:"ro,omitempty"`
	ReadWrite   []string `msgpack:"rw,omitempty"`
}

// SessionCancel is a client's notifications/cancelled forwarded to the
// other edges ([EvtSessionCancelSubject]): the client session and the raw
// JSON-RPC id of the request it cancels.
type SessionCancel struct {
	Session   string `msgpack:"s"`
	RequestID []byte `msgpack:"i"`
}

// ForwardsClientAuth reports whether the client's Authorization travels
// with its calls to the worker (proto.HdrAuthorization): for Passthrough,
// and for TokenExchange, where the worker exchanges it. False for nil.
func (a *UpstreamAuth) ForwardsClientAuth() bool {
	return a != nil && (a.Passthrough || a.TokenExchange != nil)
}

// TokenExchange is an upstream's RFC 8693 token exchange: the token
// endpoint, the worker's client id and where its secret is (a variable or
// a file, read by each worker; none for a public client), and the new
// token's audience, resource and scope.
type TokenExchange struct {
	TokenURL         string `msgpack:"u"`
	ClientID         string `msgpack:"c"`
	ClientSecretEnv  string `msgpack:"se,omitempty"`
	ClientSecretFile string `msgpack:"sf,omitempty"`
	Audience         string `msgpack:"a,omitempty"`
	Resource         string `msgpack:"r,omitempty"`
	Scope            string `msgpack:"s,omitempty"`
}

// HeaderSource is one static upstream header: Name, and its value from
// the environment variable Env or the file File (exactly one).
type HeaderSource struct {
	Name string `msgpack:"n"`
	Env  string `msgpack:"e,omitempty"`
	File string `msgpack:"f,omitempty"`
}

// List kinds: the MCP lists a worker catalogs per upstream, each stored in
// KV bucket [BucketLists] under [ListKey](upstream, kind).
const (
	KindTools             = "tools"              // tools/list: objects keyed by "name"
	KindPrompts           = "prompts"            // prompts/list: objects keyed by "name"
	KindResources         = "resources"          // resources/list: objects keyed by "uri"
	KindResourceTemplates = "resource_templates" // resources/templates/list: keyed by "uriTemplate"
)

// ListKinds are every list kind, in a fixed order.
var ListKinds = []string{KindTools, KindPrompts, KindResources, KindResourceTemplates}

// ListSet is the complete list of one kind (all pages) of one upstream, as
// raw JSON objects in the upstream's order, in KV bucket [BucketLists] under
// [ListKey](Upstream, Kind). Workers write it after (re)connecting and on
// the kind's notifications/.../list_changed; an upstream without the
// capability has an empty set. Hash lets them skip identical writes.
//
// TTLMs and CacheScope are the upstream's SEP-2549 caching hints on its
// list results (milliseconds; "public" or "private"): nil and "" when it
// gave none (a 2025-era upstream).
type ListSet struct {
	Upstream   string   `msgpack:"u"`
	Kind       string   `msgpack:"k"`
	Items      [][]byte `msgpack:"t"`
	Hash       uint64   `msgpack:"h"`
	TTLMs      *int64   `msgpack:"l,omitempty"`
	CacheScope string   `msgpack:"c,omitempty"`
	// Notified is when the upstream said this list changed (Unix
	// nanoseconds), on the set listed after that notification; 0 otherwise.
	// Such a set is written even when its items did not change, so that the
	// change reaches clients as the upstream announced it.
	Notified int64 `msgpack:"x,omitempty"`
}

// SessionRecord is a stateful (2025-era streamable HTTP) client session as
// the edges share it (KV bucket [BucketSessions], key ID): what an edge
// needs to serve the session's requests without the client initializing
// again. The edge that creates the session puts it before answering the
// initialize; any edge reads it to adopt the session.
type SessionRecord struct {
	ID string `msgpack:"i"`
	// Origin is the edge that created the session: requests of the
	// session carry it as Request.Origin wherever they are served, so that
	// workers keep one upstream session for it and task ids keep opening.
	Origin string `msgpack:"o"`
	// Tenant and View name the view the session belongs to ("" for the
	// federated one); Owner is the identity's user that created it ("":
	// anonymous). Another view or caller reads the session as not found.
	Tenant string `msgpack:"t"`
	View   string `msgpack:"v,omitempty"`
	Owner  string `msgpack:"u,omitempty"`
	// Protocol is the negotiated protocol version; Init the client's
	// initialize params as JSON (capabilities, clientInfo).
	Protocol string `msgpack:"p"`
	Init     []byte `msgpack:"c"`
	// LogLevel is the level of the client's last logging/setLevel ("":
	// none yet).
	LogLevel string `msgpack:"l,omitempty"`
	// Active is when the session was last used, Unix milliseconds: an edge
	// refreshes it while the session is in use, at most every quarter of
	// its idle timeout.
	Active int64 `msgpack:"a"`
	// Subs are the resource URIs the client is subscribed to
	// (resources/subscribe, less resources/unsubscribe), for the edges
	// that adopt the session to subscribe again after a worker holding
	// its upstream sessions goes.
	Subs []string `msgpack:"s,omitempty"`
}

// SessionLevel tells the edges that a client session's log level changed
// (logging/setLevel on one of them), so that every copy filters the
// upstream's log messages alike.
type SessionLevel struct {
	Session string `msgpack:"s"`
	Level   string `msgpack:"l"`
}

// SessionClosed tells workers that a client session ended, so they close
// the upstream sessions they hold for it.
type SessionClosed struct {
	Edge    string `msgpack:"e"`
	Session string `msgpack:"s"`
}

// ListChanged is published by routers on
// switchyard.v1.evt.list_changed.<tenant> when a list a tenant sees
// changed: Kind is the list ([KindTools], [KindPrompts], [KindResources] or
// [KindResourceTemplates]) and Upstreams names the upstreams whose items
// were added, removed or changed (their passthrough views, and the
// federated view, changed).
type ListChanged struct {
	Tenant    string   `msgpack:"t"`
	Kind      string   `msgpack:"k"`
	Upstreams []string `msgpack:"u"`
}
