package upstream

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/switchyard-mcp/switchyard/internal/taskid"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/paramhdr"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/capture"
)

// ToolStore receives an upstream's complete list set of one kind (tools,
// prompts, resources, resource templates) after every fetch of that kind
// (KV bucket proto.BucketLists in production). Store may skip a write whose
// Hash matches the stored one. It is called by one fetch at a time per
// upstream.
type ToolStore interface {
	Store(ctx context.Context, set *proto.ListSet) error
}

// Defaults of the [Options] tunables.
const (
	DefaultPingInterval   = 2 * time.Second
	DefaultPingTimeout    = time.Second
	DefaultBackoffMin     = 250 * time.Millisecond
	DefaultBackoffMax     = 5 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultIdleTimeout    = 30 * time.Minute
	DefaultCatalogTimeout = 30 * time.Second
	DefaultAskTimeout     = 60 * time.Second
	// stdioTerminate is how long closing a stdio session waits after
	// closing stdin before SIGTERM (and again before SIGKILL).
	stdioTerminate = 2 * time.Second
	// legacyProtocol is what dedicated (per client session) sessions ask for.
	legacyProtocol = "2025-11-25"
	// protocol2026 is the first sessionless protocol version (SEP-2575).
	protocol2026 = "2026-07-28"
)

// Options configures an [Upstream]. Spec, Tools and Closer are required.
type Options struct {
	// StdioVersion is the protocol version a stdio process is asked for:
	// "" means 2025-11-25 (see dial), "latest" the newest the SDK knows.
	StdioVersion string
	Spec         proto.UpstreamSpec
	Worker       string // this worker's id, for logs and the client name
	// HTTPClient's Transport is shared by every HTTP session (nil:
	// http.DefaultTransport); its Jar and CheckRedirect are kept, its
	// Timeout is not (streams are long-lived).
	HTTPClient *http.Client
	Tools      ToolStore
	Closer     *Closer
	// OnState is called, from the actor goroutine, after the upstream's
	// state (up, error text) changed. It must not block.
	OnState func()
	Log     *slog.Logger

	// Tunables; zero means the Default* constant.
	PingInterval, PingTimeout   time.Duration
	BackoffMin, BackoffMax      time.Duration
	ConnectTimeout, IdleTimeout time.Duration
	CatalogTimeout              time.Duration
	// MaxResultBytes bounds one captured HTTP response message and one
	// legacy-SSE event; 0 means capture.DefaultMaxMessageBytes.
	MaxResultBytes int
	// Sessions returns the relay of a client session's session-level
	// messages (proto.EdgeMsgSubject with proto.HdrSession), or nil; nil
	// Sessions drops them.
	Sessions func(edge, session string) Relay
	// AskTimeout bounds how long a session-level request from the upstream
	// (one tied to no call) waits for its client; 0 means
	// DefaultAskTimeout.
	AskTimeout time.Duration
	// TaskIDs mints and opens the gateway's task ids (SEP-2663 tasks);
	// nil leaves an upstream's task ids unchanged and answers every
	// tasks/get, tasks/update and tasks/cancel with an unknown taskId.
	TaskIDs *taskid.Codec
}

func (o *Options) fill() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.PingInterval, DefaultPingInterval)
	def(&o.PingTimeout, DefaultPingTimeout)
	def(&o.BackoffMin, DefaultBackoffMin)
	def(&o.BackoffMax, DefaultBackoffMax)
	def(&o.ConnectTimeout, DefaultConnectTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)
	def(&o.CatalogTimeout, DefaultCatalogTimeout)
	def(&o.AskTimeout, DefaultAskTimeout)
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.OnState == nil {
		o.OnState = func() {}
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = capture.DefaultMaxMessageBytes
	}
	if o.Spec.Processes <= 0 {
		o.Spec.Processes = 1
	}
}

// Upstream is the actor for one upstream server. Create it with [New], run
// it with [Upstream.Run]; [Upstream.Call], [Upstream.Request], [Upstream.State],
// [Upstream.RefreshCatalog] and [Upstream.SessionClosed] are safe for
// concurrent use from any goroutine.
type Upstream struct {
	opts   Options
	name   string
	log    *slog.Logger
	impl   *mcp.Implementation // the worker's clientInfo
	info   []byte              // impl, encoded
	shared *mcp.ClientCapabilities
	prober *mcp.Client // no handlers: its sessions open no streams
	closer *Closer
	// base is the HTTP transport under every session's chain
	// (baseTransport); never changed after New.
	base http.RoundTripper
	// rawCalls: tools/call bypasses the SDK (streamable HTTP, see rawCall;
	// stdio, see pipeCall).
	// Tests clear it before Run to compare with the SDK path.
	rawCalls bool

	kick     chan struct{} // cap 1: refetch the dirty and expired lists
	dirty    atomic.Uint32 // the list kinds (bit* flags) a list_changed marked
	expired  atomic.Uint32 // the list kinds whose ttlMs ran out (refetched without Notified)
	check    chan struct{} // cap 1: ping now (a call saw a transport error)
	rr       atomic.Uint64 // stdio round-robin
	pings    atomic.Uint64 // successful pings of the pool session
	restarts atomic.Uint64 // reconnects after a failed connect or a lost generation
	// skips counts the stdout lines of a stdio server that were not
	// messages, by reason (SkipReasons order); skipLogged is when one was
	// last logged (Unix nanoseconds; at most one warning per skipLogEvery).
	skips      [len(SkipReasons)]atomic.Uint64
	skipLogged atomic.Int64
	// sandboxWarn logs once that the kernel cannot enforce the sandbox's
	// Landlock rules.
	sandboxWarn sync.Once
	// exchange is the token exchange of an upstream with one
	// (exchange.go); nil otherwise.
	exchange *exchanger
	// levels is the most verbose log level clients asked of the shared
	// sessions, set again on each new one (levels.go).
	levels sharedLevels
	snap   atomic.Pointer[snapshot]
	pool   *lazy    // HTTP pool session
	origin *url.URL // the spec URL's origin: where credentials go (auth.go)
	// params holds the SEP-2243 header bindings of the upstream's tools
	// (by tool name), from the latest catalog fetch.
	params     atomic.Pointer[map[string][]paramhdr.Binding]
	readers    sync.Pool     // *bufio.Reader of raw SSE responses (sseReadBuffer)
	asks       chan struct{} // one token per upstream request waiting for a client (maxAsks)
	progSeq    atomic.Uint64 // numbers our progress tokens
	progPrefix string        // starts them: "sy-" and a random token, revealing nothing
	// dedicated2026: the upstream keeps no state for a 2025-11-25 session
	// (it gave none an id) but speaks 2026-07-28, so dedicated sessions
	// ask for 2026-07-28 (see dial).
	dedicated2026 atomic.Bool

	catMu sync.Mutex // serializes catalog fetches

	// ttlMu (taken inside catMu) guards the SEP-2549 ttlMs refreshes, by
	// listKinds index: the gateway's copy of a list is refetched when the
	// upstream's ttlMs for it runs out.
	ttlMu     sync.Mutex
	ttls      [len(listKinds)]time.Duration // guarded by ttlMu: delay from the stored set's ttlMs; 0: none
	ttlTimers [len(listKinds)]*time.Timer   // guarded by ttlMu: nil until first armed
	ttlOff    bool                          // guarded by ttlMu: Run has returned

	progMu   sync.Mutex
	progress map[string]*progressEntry // guarded by progMu: calls by our progress token

	mu        sync.Mutex
	dedicated map[sessKey]*lazy // guarded by mu
	stopped   bool              // guarded by mu: Run has returned
}

// snapshot is the immutable state calls read.
type snapshot struct {
	up    bool
	err   string
	procs []*session // stdio: the running processes while up
}

type sessKey struct{ edge, session string }

// New returns the actor for o.Spec. It does no I/O.
func New(o Options) *Upstream {
	if o.Tools == nil || o.Closer == nil {
		panic("upstream: Options.Tools and Options.Closer are required")
	}
	o.fill()
	u := &Upstream{
		opts:       o,
		name:       o.Spec.Name,
		progPrefix: "sy-" + strings.ToLower(rand.Text()[:10]) + "-",
		log:        o.Log.With(proto.LogUpstream, o.Spec.Name),
		closer:     o.Closer,
		kick:       make(chan struct{}, 1),
		check:      make(chan struct{}, 1),
		dedicated:  map[sessKey]*lazy{},
		rawCalls:   o.Spec.Transport == proto.TransportStreamable || o.Spec.Transport == proto.TransportStdio,
		impl:       &mcp.Implementation{Name: "switchyard-worker", Version: "v1"},
		shared:     sharedCaps(),
		asks:       make(chan struct{}, maxAsks),
	}
	info, err := json.Marshal(u.impl)
	if err != nil {
		panic(err)
	}
	u.info = info
	u.prober = mcp.NewClient(&mcp.Implementation{Name: "switchyard-worker-probe", Version: "v1"}, &mcp.ClientOptions{
		Logger:         u.log,
		Capabilities:   &mcp.ClientCapabilities{},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	u.base = o.HTTPClient.Transport
	if u.base == nil {
		u.base = http.DefaultTransport
	}
	if u.isHTTP() {
		u.base = newH1Transport(u.base, o.Spec.URL)
	}
	u.pool = u.newLazy(nil, nil)
	u.origin = parseOrigin(o.Spec.URL)
	if a := o.Spec.Auth; a != nil && a.TokenExchange != nil {
		base := o.HTTPClient.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		// No redirects: one would post the client's token elsewhere.
		u.exchange = &exchanger{spec: *a.TokenExchange, hc: &http.Client{Transport: base, Timeout: exchangeTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	}
	u.snap.Store(&snapshot{err: "connecting"})
	return u
}

// Name is the upstream's name.
func (u *Upstream) Name() string { return u.name }

// Spec is the spec the actor was built from (Processes defaulted).
func (u *Upstream) Spec() proto.UpstreamSpec { return u.opts.Spec }

// Pings returns the number of successful pool pings (for tests and
// metrics).
func (u *Upstream) Pings() uint64 { return u.pings.Load() }

// Restarts returns how many times Run reconnected after losing the
// upstream or failing to reach it (for metrics).
func (u *Upstream) Restarts() uint64 { return u.restarts.Load() }

// SkipReasons are why a stdio server's stdout line was skipped: not JSON
// (a banner, a log line), a message with text after it on its line, JSON
// that is not JSON-RPC, a message over max_message_bytes.
var SkipReasons = [...]string{skipNotJSON, skipTrailing, skipInvalid, skipTooLarge}

// Skipped returns how many stdout lines of this stdio upstream's
// processes were skipped for reason (one of SkipReasons), since start.
func (u *Upstream) Skipped(reason string) uint64 {
	for i, r := range SkipReasons {
		if r == reason {
			return u.skips[i].Load()
		}
	}
	return 0
}

// skipLogEvery bounds the warnings about skipped stdout lines of one
// upstream: a server that prints a line per call would flood the log.
const skipLogEvery = 10 * time.Second

// skipLine counts a skipped stdout line and logs it, at most once per
// skipLogEvery (with the count since the last warning), with its first
// bytes.
func (u *Upstream) skipLine(reason string, head []byte) {
	for i, r := range SkipReasons {
		if r == reason {
			u.skips[i].Add(1)
		}
	}
	now := time.Now().UnixNano()
	last := u.skipLogged.Load()
	if now-last < int64(skipLogEvery) || !u.skipLogged.CompareAndSwap(last, now) {
		return
	}
	if reason != skipNotJSON {
		// JSON a server wrote (a result too large, a JSON log line) may
		// carry what its calls returned: its bytes stay out of the log.
		u.log.Warn("stdio server wrote a line that is not a message; skipped", "reason", reason)
		return
	}
	u.log.Warn("stdio server wrote a line that is not a message; skipped", "reason", reason, "line", string(head))
}

// Shared returns the number of shared upstream sessions open now: the
// running stdio processes, or 1 while the HTTP pool session is open (for
// metrics).
func (u *Upstream) Shared() int {
	if !u.isHTTP() {
		return len(u.snap.Load().procs)
	}
	if u.pool.current() != nil {
		return 1
	}
	return 0
}

// CallTimeout is the spec's call timeout, or def when it has none.
func (u *Upstream) CallTimeout(def time.Duration) time.Duration {
	if ms := u.opts.Spec.CallTimeoutMs; ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return def
}

// State is the upstream as heartbeats report it: Up once connected and
// catalogued, else Err says why not.
func (u *Upstream) State() proto.UpstreamState {
	s := u.snap.Load()
	return proto.UpstreamState{Name: u.name, Up: s.up, Err: s.err}
}

func (u *Upstream) setState(s *snapshot) {
	old := u.snap.Swap(s)
	if old.up == s.up && old.err == s.err {
		return
	}
	switch {
	case s.up:
		u.log.Info("upstream up")
	case s.err == errStopped.Error(): // the worker is shutting down: nothing is wrong
		u.log.Info("upstream stopped")
	default:
		u.log.Warn("upstream down", proto.LogErr, s.err)
	}
	u.opts.OnState()
}

// unavailable is the error of a call to an upstream that is down: detail
// (its state's text, or the transport's error) says why, for operators;
// the client is told only a fixed phrase for it (bus.UnavailableReason),
// since the detail names the upstream's URL, addresses or command.
func (u *Upstream) unavailable(detail string) *proto.Error {
	return proto.Errorf(proto.CodeUpstreamUnavailable, "upstream %s is unavailable (%s)", u.name, bus.UnavailableReason(detail))
}

func (u *Upstream) isHTTP() bool { return u.opts.Spec.Transport != proto.TransportStdio }

// bindings returns the SEP-2243 header bindings of tool, if it has any.
func (u *Upstream) bindings(tool string) []paramhdr.Binding {
	if m := u.params.Load(); m != nil {
		return (*m)[tool]
	}
	return nil
}

// signal does a non-blocking send on a cap-1 channel.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

var errStopped = fmt.Errorf("upstream stopped")
