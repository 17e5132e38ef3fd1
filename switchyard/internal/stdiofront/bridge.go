package stdiofront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Errors Run returns.
var (
	// ErrUnreachable: the gateway did not answer at start.
	ErrUnreachable = errors.New("stdiofront: gateway unreachable")
	// ErrSessionExpired: the gateway answered 404 for the session; a stdio
	// client cannot re-initialize behind the bridge's back.
	ErrSessionExpired = errors.New("stdiofront: the gateway session expired or was closed (HTTP 404)")
)

var (
	errEventTooLarge = errors.New("stdiofront: server-sent event over the size limit")
	errDrained       = errors.New("stdiofront: stdin closed and the drain timeout passed")
)

// Defaults of the zero Config fields.
const (
	DefaultMaxLineBytes    = 16 << 20
	DefaultMaxMessageBytes = 256 << 20
	DefaultDrainTimeout    = 5 * time.Second
	DefaultProbeTimeout    = 10 * time.Second
	DefaultReconnectMin    = 250 * time.Millisecond
	DefaultReconnectMax    = 30 * time.Second
	DefaultMaxInFlight     = 256
)

// protocol2026 is the first protocol version without sessions, whose
// requests carry their version in params._meta and need the Mcp-Method and
// Mcp-Name headers.
const protocol2026 = "2026-07-28"

// logStatus is the log key of an HTTP status (the shared keys are in proto).
const logStatus = "status"

// msgExpired answers the requests pending when the session is gone.
const msgExpired = "switchyard stdio: the gateway session expired or was closed (HTTP 404); restart the MCP client"

// listenWait bounds the wait for the GET stream after
// notifications/initialized.
const listenWait = 2 * time.Second

// maxErrorBody bounds what the bridge reads of a non-2xx response.
const maxErrorBody = 1 << 20

// Config configures a [Bridge].
type Config struct {
	// URL is the gateway's streamable HTTP endpoint (http or https), e.g.
	// http://127.0.0.1:8080/mcp or .../mcp/<upstream>. Required.
	URL string
	// Header is added to every request (e.g. Authorization). It may not
	// name the headers the bridge sets itself (see [ParseHeader]).
	Header http.Header
	// Stdin and Stdout are the client's side. Required. Run closes Stdin
	// when it stops reading, if it is an io.Closer.
	Stdin  io.Reader
	Stdout io.Writer
	// HTTPClient sends the requests; nil: a client of its own. Its Timeout
	// must be zero: streams last as long as a call, or the session.
	HTTPClient *http.Client
	// MaxLineBytes bounds one stdin message; longer ones are answered with
	// -32600. 0: [DefaultMaxLineBytes] (16 MiB).
	MaxLineBytes int
	// MaxMessageBytes bounds one message from the gateway. 0:
	// [DefaultMaxMessageBytes] (256 MiB).
	MaxMessageBytes int
	// DrainTimeout bounds the wait for calls in flight once stdin has
	// ended. 0: [DefaultDrainTimeout] (5 s).
	DrainTimeout time.Duration
	// ProbeTimeout bounds the reachability check at start. 0:
	// [DefaultProbeTimeout] (10 s).
	ProbeTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the backoff of the GET stream's
	// reconnections (a server's SSE retry field wins). 0: 250 ms and 30 s.
	ReconnectMin, ReconnectMax time.Duration
	// MaxInFlight bounds the POSTs in flight; reading stdin waits beyond.
	// 0: [DefaultMaxInFlight].
	MaxInFlight int
}

// Bridge is one stdio client's connection to the gateway. It is used
// once: New, then Run.
type Bridge struct {
	cfg    Config
	url    string
	client *http.Client
	log    *slog.Logger

	posts  sync.WaitGroup // exchanges in flight
	listen sync.WaitGroup // the GET stream
	sem    chan struct{}

	stop      context.CancelCauseFunc // ends the bridge with a fatal cause
	getCtx    context.Context         // the GET stream's context
	startOnce sync.Once               // opens the GET stream
	listening atomic.Bool             // the GET stream was started
	listenUp  chan struct{}           // closed at the GET stream's first answer, or its end

	outMu sync.Mutex
	out   *bufio.Writer // guarded by outMu
	// outErr is the first stdout write error; guarded by outMu.
	outErr error

	mu        sync.Mutex
	sessionID string // guarded by mu: from the initialize response
	version   string // guarded by mu: the initialize result's protocolVersion
	// metaVersion is the last params._meta protocol version the client
	// sent (its era, when it never initializes); guarded by mu.
	metaVersion string
}

// New checks cfg and fills its defaults. It starts nothing. A nil logger
// discards.
func New(cfg Config, log *slog.Logger) (*Bridge, error) {
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		return nil, errors.New("stdiofront: URL is required")
	case err != nil:
		return nil, fmt.Errorf("stdiofront: URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("stdiofront: URL %q: want http://host[:port]/path or https://...", u.Redacted())
	case cfg.Stdin == nil || cfg.Stdout == nil:
		return nil, errors.New("stdiofront: Stdin and Stdout are required")
	case cfg.HTTPClient != nil && cfg.HTTPClient.Timeout != 0:
		return nil, errors.New("stdiofront: HTTPClient.Timeout must be zero (streams are long)")
	}
	for name := range cfg.Header {
		if err := checkHeaderName(name); err != nil {
			return nil, fmt.Errorf("stdiofront: %w", err)
		}
	}
	cfg.Header = cfg.Header.Clone()
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	cfg.MaxLineBytes = orDefault(cfg.MaxLineBytes, DefaultMaxLineBytes)
	cfg.MaxMessageBytes = orDefault(cfg.MaxMessageBytes, DefaultMaxMessageBytes)
	cfg.DrainTimeout = orDefault(cfg.DrainTimeout, DefaultDrainTimeout)
	cfg.ProbeTimeout = orDefault(cfg.ProbeTimeout, DefaultProbeTimeout)
	cfg.ReconnectMin = orDefault(cfg.ReconnectMin, DefaultReconnectMin)
	cfg.ReconnectMax = max(orDefault(cfg.ReconnectMax, DefaultReconnectMax), cfg.ReconnectMin)
	cfg.MaxInFlight = orDefault(cfg.MaxInFlight, DefaultMaxInFlight)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Bridge{
		cfg:      cfg,
		url:      u.String(),
		client:   cfg.HTTPClient,
		log:      log.With(proto.LogComponent, "stdiofront"),
		sem:      make(chan struct{}, cfg.MaxInFlight),
		listenUp: make(chan struct{}),
		out:      bufio.NewWriterSize(cfg.Stdout, 64<<10),
	}, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Run bridges until stdin ends or ctx is cancelled, then waits (at most
// DrainTimeout) for the calls in flight, closes the GET stream and DELETEs
// the session; it returns nil then. It returns an error wrapping
// [ErrUnreachable] when the gateway does not answer at start,
// [ErrSessionExpired] when the gateway has dropped the session (after
// answering every pending request with an error), or the stdout write
// error. Call it once.
func (b *Bridge) Run(ctx context.Context) error {
	if c, ok := b.cfg.Stdin.(io.Closer); ok {
		defer c.Close()
	}
	if err := b.probe(ctx); err != nil {
		return err
	}
	life, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	b.stop = stop
	posts, cancelPosts := context.WithCancelCause(life)
	defer cancelPosts(nil)
	getCtx, cancelGet := context.WithCancel(life)
	defer cancelGet()
	b.getCtx = getCtx

	lines := make(chan stdinLine)
	go b.read(life, lines)
loop:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break loop
			}
			b.dispatch(posts, l)
		case <-life.Done():
			break loop
		}
	}

	drained := make(chan struct{})
	go func() { b.posts.Wait(); close(drained) }()
	t := time.NewTimer(b.cfg.DrainTimeout)
	select {
	case <-drained:
	case <-t.C:
		b.log.Warn("calls still in flight after stdin closed, cancelling them")
		cancelPosts(errDrained)
		<-drained
	case <-life.Done():
		<-drained
	}
	t.Stop()
	cancelGet()
	b.listen.Wait()

	cause := context.Cause(life)
	if errors.Is(cause, ErrSessionExpired) {
		return ErrSessionExpired
	}
	b.deleteSession(context.WithoutCancel(ctx))
	if b.flushErr() != nil {
		return b.flushErr()
	}
	return nil
}

// read feeds stdin lines to Run until stdin ends or life does.
func (b *Bridge) read(life context.Context, lines chan<- stdinLine) {
	defer close(lines)
	lr := &lineReader{r: bufio.NewReaderSize(b.cfg.Stdin, 64<<10), max: b.cfg.MaxLineBytes}
	for {
		l, err := lr.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				b.log.Warn("stdin failed, stopping", proto.LogErr, err)
			} else {
				b.log.Debug("stdin closed")
			}
			return
		}
		select {
		case lines <- l:
		case <-life.Done():
			return
		}
	}
}

// probe checks that the gateway answers at all (any HTTP status will do).
func (b *Bridge) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, b.url, nil)
	if err != nil {
		return fmt.Errorf("stdiofront: %w", err)
	}
	b.setHeaders(req.Header)
	resp, err := b.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, b.redactedURL(), err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		b.log.Warn("gateway rejects the request credentials (see --header)", logStatus, resp.StatusCode)
	}
	return nil
}

func (b *Bridge) redactedURL() string {
	u, _ := url.Parse(b.url)
	return u.Redacted()
}

// dispatch starts the POST of one stdin line. It returns once the request
// has been written (so POSTs start in stdin order), or, for initialize,
// once the exchange is over (what follows needs its session id).
func (b *Bridge) dispatch(ctx context.Context, l stdinLine) {
	if l.tooLong {
		b.log.Warn("stdin message over the size limit, rejected", "limit_bytes", b.cfg.MaxLineBytes)
		b.emit(errorLine(l.id, CodeInvalidRequest, fmt.Sprintf("Invalid Request: message over %d bytes", b.cfg.MaxLineBytes)))
		return
	}
	m, reply := parseClientMsg(l.msg)
	if reply != nil {
		b.log.Warn("stdin message rejected")
		b.emit(reply)
		return
	}
	if m.version != "" {
		b.mu.Lock()
		b.metaVersion = m.version
		b.mu.Unlock()
	}
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		b.answerUnsent(ctx, m)
		return
	}
	wrote := make(chan struct{})
	done := make(chan struct{})
	b.posts.Add(1)
	go func() {
		defer b.posts.Done()
		defer func() { <-b.sem }()
		defer close(done)
		b.exchange(ctx, m, sync.OnceFunc(func() { close(wrote) }))
	}()
	select {
	case <-wrote:
	case <-done:
	case <-ctx.Done():
	}
	switch m.method {
	case "initialize":
		select {
		case <-done:
		case <-ctx.Done():
		}
	case "notifications/initialized":
		// A server that answers POSTs with JSON sends what a call says
		// on the way (progress, elicitation) on the GET stream, and
		// drops it while that stream is not open: open it first.
		select {
		case <-done:
		case <-ctx.Done():
		}
		b.awaitListen(ctx)
	}
}

// awaitListen waits, boundedly, for the GET stream's first answer, if it
// was started.
func (b *Bridge) awaitListen(ctx context.Context) {
	if !b.listening.Load() {
		return
	}
	t := time.NewTimer(listenWait)
	defer t.Stop()
	select {
	case <-b.listenUp:
	case <-t.C:
		b.log.Debug("GET stream not open yet, going on")
	case <-ctx.Done():
	}
}

// answerUnsent answers a request that was never sent.
func (b *Bridge) answerUnsent(ctx context.Context, m *clientMsg) {
	if m.isRequest() {
		b.emit(errorLine(m.id, CodeInternalError, stoppedMessage(ctx)))
	}
}

func stoppedMessage(ctx context.Context) string {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrSessionExpired):
		return msgExpired
	case errors.Is(cause, errDrained):
		return "switchyard stdio: stdin closed before the gateway answered"
	default:
		return "switchyard stdio is stopping"
	}
}

// setHeaders sets the configured headers on h.
func (b *Bridge) setHeaders(h http.Header) {
	for k, vs := range b.cfg.Header {
		h[k] = append([]string(nil), vs...)
	}
}

// session returns the session id and the protocol version for the
// MCP-Protocol-Version header: the negotiated one, else the one the client
// last named in params._meta.
func (b *Bridge) session() (id, version string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.version != "" {
		return b.sessionID, b.version
	}
	return b.sessionID, b.metaVersion
}

// exchange POSTs one message and writes what comes back. Every request
// gets an answer on stdout, the gateway's or an error of the bridge's.
func (b *Bridge) exchange(ctx context.Context, m *clientMsg, wrote func()) {
	sess, version := b.session()
	isInit := m.method == "initialize"
	if isInit {
		sess, version = "", "" // a new session, its version not yet known
	}
	if m.version != "" {
		version = m.version // the gateway routes by it (2026-07-28: sessionless)
	}
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote() }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, b.url, bytes.NewReader(m.raw))
	if err != nil {
		b.failed(m, "switchyard stdio: "+err.Error())
		return
	}
	b.setHeaders(req.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sess != "" {
		req.Header.Set("Mcp-Session-Id", sess)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if version >= protocol2026 && m.isRequest() {
		req.Header.Set("Mcp-Method", m.method)
		if m.name != "" {
			req.Header.Set("Mcp-Name", m.name)
		}
	}
	resp, err := b.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			b.failed(m, stoppedMessage(ctx))
			return
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		b.failed(m, "switchyard stdio: gateway unreachable: "+err.Error())
		return
	}
	defer resp.Body.Close()

	x := &answer{}
	if m.isRequest() {
		x.key, x.id = idKey(m.id), m.id
	}
	if isInit && resp.StatusCode/100 == 2 {
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			b.mu.Lock()
			b.sessionID = id
			b.mu.Unlock()
		}
		x.init = true
	}
	if resp.StatusCode/100 != 2 {
		b.httpError(m, resp, sess, x)
		return
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case ct == "text/event-stream":
		st := &sseState{}
		err := readSSE(resp.Body, b.cfg.MaxMessageBytes, st, func(data []byte) error { return b.deliver(data, x) })
		if err == nil && !x.done && m.isRequest() && st.lastID != "" && sess != "" {
			err = b.resume(ctx, st, x)
		}
		if err != nil && ctx.Err() == nil {
			b.log.Warn("gateway event stream failed", proto.LogMethod, m.method, proto.LogErr, err)
		}
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
	default:
		body, err := readAtMost(resp.Body, b.cfg.MaxMessageBytes)
		switch {
		case err != nil:
			b.log.Warn("reading the gateway response failed", proto.LogMethod, m.method, proto.LogErr, err)
		case len(bytes.TrimSpace(body)) > 0:
			_ = b.deliver(body, x)
		}
	}
	if !x.done && m.isRequest() {
		if ctx.Err() != nil {
			b.failed(m, stoppedMessage(ctx))
		} else {
			b.failed(m, fmt.Sprintf("switchyard stdio: the gateway ended the response (HTTP %d) without answering the request", resp.StatusCode))
		}
	}
	if m.method == "notifications/initialized" && resp.StatusCode/100 == 2 {
		b.startListen()
	}
}

// answer tracks whether the gateway has answered one request. Only the
// request's exchange goroutine uses it.
type answer struct {
	key  string // idKey of the request; "" for a notification or response
	id   []byte // the request's raw id
	init bool   // the request is initialize: sniff the negotiated version
	done bool
}

// httpError handles a non-2xx answer to a POST: a JSON-RPC body answers
// a request, anything else becomes an error of the bridge's (a 404 for
// the session ends the bridge). For a notification or a response it only
// logs: the client waits for nothing.
func (b *Bridge) httpError(m *clientMsg, resp *http.Response, sess string, x *answer) {
	body, _ := readAtMost(resp.Body, maxErrorBody)
	body = bytes.TrimSpace(body)
	var rpc serverMsg
	isRPC := json.Valid(body) && func() bool {
		var ok bool
		rpc, ok = parseServerMsg(body)
		return ok && rpc.isResponse()
	}()
	if resp.StatusCode == http.StatusNotFound && sess != "" && !isRPC {
		b.log.Error("the gateway no longer knows the session", logStatus, resp.StatusCode)
		b.failed(m, msgExpired)
		b.stop(ErrSessionExpired)
		return
	}
	if isRPC && m.isRequest() {
		_ = b.deliver(body, x)
		if x.done {
			return
		}
	}
	b.log.Warn("gateway answered with an HTTP error", proto.LogMethod, m.method, logStatus, resp.StatusCode)
	b.failed(m, fmt.Sprintf("switchyard stdio: the gateway answered HTTP %d %s%s", resp.StatusCode, http.StatusText(resp.StatusCode), bodyHint(body)))
}

// bodyHint returns ": <first line of a text body>", shortened.
func bodyHint(body []byte) string {
	if i := bytes.IndexAny(body, "\r\n"); i >= 0 {
		body = body[:i]
	}
	if len(body) == 0 {
		return ""
	}
	if len(body) > 200 {
		body = append(body[:200:200], "..."...)
	}
	return ": " + string(bytes.ToValidUTF8(body, []byte("?")))
}

func readAtMost(r io.Reader, n int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(n)+1))
	if err == nil && len(b) > n {
		err = fmt.Errorf("gateway response over %d bytes", n)
	}
	return b, err
}

// failed answers m with a JSON-RPC error when it is a request; otherwise
// the client waits for nothing and the failure is only logged.
func (b *Bridge) failed(m *clientMsg, msg string) {
	if m.isRequest() {
		b.emit(errorLine(m.id, CodeInternalError, msg))
		return
	}
	b.log.Warn("gateway did not take a message", proto.LogMethod, m.method, "reason", msg)
}

// deliver writes one message from the gateway to stdout, noting whether
// it answers the request x tracks (nil: none). An error response with a
// null id on that request's own response is its answer: it gets the
// request's id, or the client would wait forever. The error is stdout's.
func (b *Bridge) deliver(msg []byte, x *answer) error {
	if len(bytes.TrimSpace(msg)) == 0 {
		return nil // an SSE priming event (SEP-1699): an id, no message
	}
	if !json.Valid(msg) {
		b.log.Warn("gateway sent a message that is not JSON, dropped", "bytes", len(msg))
		return nil
	}
	line, err := oneLine(msg)
	if err != nil {
		return nil // unreachable: msg is valid JSON
	}
	if x != nil && x.key != "" && !x.done {
		s, ok := parseServerMsg(line)
		switch {
		case !ok || !s.isResponse():
		case s.id != nil && idKey(s.id) == x.key:
			x.done = true
			if x.init && s.result != nil {
				if v := resultProtocolVersion(s.result); v != "" {
					b.mu.Lock()
					b.version = v
					b.mu.Unlock()
				}
			}
		case (s.id == nil || string(s.id) == "null") && s.errorVal != nil:
			x.done = true
			line = withID(x.id, s.errorVal)
		}
	}
	b.emit(line)
	return b.flushErr()
}

// emit writes one line to stdout. A write error ends the bridge; later
// lines are dropped.
func (b *Bridge) emit(line []byte) {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	if b.outErr != nil {
		return
	}
	_, _ = b.out.Write(line)
	_ = b.out.WriteByte('\n')
	if err := b.out.Flush(); err != nil {
		b.outErr = fmt.Errorf("stdiofront: write stdout: %w", err)
		if b.stop != nil {
			b.stop(b.outErr)
		}
	}
}

func (b *Bridge) flushErr() error {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	return b.outErr
}

// get opens a GET event stream of the session, resuming after lastID when
// it is set.
func (b *Bridge) get(ctx context.Context, lastID string) (*http.Response, error) {
	sess, version := b.session()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url, nil)
	if err != nil {
		return nil, err
	}
	b.setHeaders(req.Header)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sess)
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return b.client.Do(req)
}

// resume picks a POST's event stream up again after it ended without the
// answer (the spec's resumption: GET with Last-Event-ID), a few times.
func (b *Bridge) resume(ctx context.Context, st *sseState, x *answer) error {
	for attempt := 0; attempt < 3 && !x.done && ctx.Err() == nil; attempt++ {
		if !sleep(ctx, max(st.retry, b.cfg.ReconnectMin)) {
			return nil
		}
		resp, err := b.get(ctx, st.lastID)
		if err != nil {
			continue
		}
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if resp.StatusCode/100 != 2 || ct != "text/event-stream" {
			resp.Body.Close()
			b.log.Debug("gateway does not resume event streams", logStatus, resp.StatusCode)
			return nil
		}
		err = readSSE(resp.Body, b.cfg.MaxMessageBytes, st, func(data []byte) error { return b.deliver(data, x) })
		resp.Body.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// startListen opens the GET stream for the server's own messages, once,
// when there is a session.
func (b *Bridge) startListen() {
	if sess, _ := b.session(); sess == "" {
		return
	}
	b.startOnce.Do(func() {
		b.listening.Store(true)
		b.listen.Add(1)
		go func() {
			defer b.listen.Done()
			up := sync.OnceFunc(func() { close(b.listenUp) })
			defer up()
			b.listenLoop(b.getCtx, up)
		}()
	})
}

// listenLoop copies the GET stream to stdout, reconnecting with backoff
// and Last-Event-ID when it drops, until ctx ends, the server has no GET
// stream (405) or no session anymore (404). It calls up at the first
// answer.
func (b *Bridge) listenLoop(ctx context.Context, up func()) {
	st := &sseState{}
	backoff := b.cfg.ReconnectMin
	for ctx.Err() == nil {
		resp, err := b.get(ctx, st.lastID)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b.log.Debug("GET stream failed, retrying", proto.LogErr, err)
		} else {
			up()
			ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			switch code := resp.StatusCode; {
			case code == http.StatusMethodNotAllowed:
				resp.Body.Close()
				b.log.Debug("gateway offers no GET stream")
				return
			case code == http.StatusNotFound:
				resp.Body.Close()
				b.log.Error("the gateway no longer knows the session", logStatus, code)
				b.stop(ErrSessionExpired)
				return
			case code == http.StatusBadRequest && st.lastID != "":
				resp.Body.Close()
				b.log.Debug("gateway cannot replay the GET stream, reconnecting without Last-Event-ID")
				st.lastID = ""
				continue
			case code/100 == 2 && ct == "text/event-stream":
				got := false
				err := readSSE(resp.Body, b.cfg.MaxMessageBytes, st, func(data []byte) error {
					got = true
					return b.deliver(data, nil)
				})
				resp.Body.Close()
				if got {
					backoff = b.cfg.ReconnectMin
				}
				if err != nil && ctx.Err() == nil {
					b.log.Debug("GET stream ended", proto.LogErr, err)
				}
			case code == http.StatusTooManyRequests || code/100 == 5:
				resp.Body.Close()
				b.log.Debug("GET stream refused, retrying", logStatus, code)
			default:
				resp.Body.Close()
				b.log.Warn("gateway refused the GET stream, server messages outside calls will not arrive", logStatus, code)
				return
			}
		}
		wait := backoff
		if st.retry > 0 {
			wait = st.retry
		}
		if !sleep(ctx, wait) {
			return
		}
		backoff = min(2*backoff, b.cfg.ReconnectMax)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// deleteSession ends the session at the gateway (best effort, 2 s).
func (b *Bridge) deleteSession(ctx context.Context) {
	sess, version := b.session()
	if sess == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, b.url, nil)
	if err != nil {
		return
	}
	b.setHeaders(req.Header)
	req.Header.Set("Mcp-Session-Id", sess)
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.log.Warn("DELETE of the session failed", proto.LogErr, err)
		return
	}
	resp.Body.Close()
	b.log.Debug("session deleted", logStatus, resp.StatusCode)
}
