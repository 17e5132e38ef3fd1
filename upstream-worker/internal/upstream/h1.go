package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// h1Transport sends an upstream's plain-HTTP POSTs as synchronous
// HTTP/1.1 exchanges on its own keep-alive connections: the calling
// goroutine writes the request (Request.Write) and reads the response
// (http.ReadResponse) itself. http.Transport hands every request to a
// connection's write goroutine and its response back from a read
// goroutine; those hand-offs were about a third of the worker's HTTP
// cost per call (a micro-benchmark at 64 concurrent requests: 32 µs →
// 22 µs per exchange, 66 → 39 allocations). Every other request (GET
// streams, DELETE, a body over h1MaxBody or of unknown length) goes to
// the base transport.
//
// It is used only where http.Transport would send the same request on a
// plain TCP connection (see newH1Transport), less its Accept-Encoding:
// gzip, which http.Transport adds and undoes itself: responses come
// uncompressed. A connection is reused only
// after its response body was read to the end and the response allowed
// it (no Connection: close); an idle one is checked with a non-blocking
// peek before reuse and closed after the base transport's
// IdleConnTimeout. As http.Transport does, a POST that failed on a
// reused connection is not sent again.
//
// Safe for concurrent use.
type h1Transport struct {
	base    http.RoundTripper
	addr    string // host:port of the upstream
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle int
	idleFor time.Duration // 0: idle connections never expire
	// maxHeader bounds a response's status line and header, in bytes
	// (http.Transport's MaxResponseHeaderBytes).
	maxHeader int64

	mu     sync.Mutex
	idle   []*h1Conn // guarded by mu; most recently used last
	closed bool      // guarded by mu: CloseIdleConnections was called
	sweep  *time.Timer
}

// h1Conn is one keep-alive connection.
type h1Conn struct {
	c    net.Conn
	lr   limitReader // c, limited while a response header is read
	br   *bufio.Reader
	bw   *bufio.Writer
	idle time.Time // when it was last put back
}

// limitReader reads r, failing once n bytes were read.
type limitReader struct {
	r   io.Reader
	n   int64
	max int64 // the limit that n counts down, for the error
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("server response headers exceeded %d bytes; aborted", l.max)
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

const noLimit = 1<<63 - 1

// h1MaxBody is the largest request body h1Transport sends, in bytes. A
// synchronous exchange reads the answer only after the whole request is
// written: a server that answers early (413) without reading the body
// would block a write larger than the socket buffers can take until the
// request's deadline. Bodies this small always fit in them (a loopback
// or LAN TCP connection buffers well over 32 KiB unread); larger ones, and
// bodies of unknown length, go to the base transport, which reads while
// it writes.
const h1MaxBody = 32 << 10

// newH1Transport returns base, or an h1Transport in front of it for the
// upstream at endpoint: when endpoint is http:// (not TLS) and base is an
// *http.Transport that sends it directly (no proxy for it), with
// keep-alives and without a custom TLS, HTTP/2 or response-header setup,
// nor a bound on connections per host (MaxConnsPerHost: http.Transport
// makes requests wait for a connection; h1Transport would dial more).
func newH1Transport(base http.RoundTripper, endpoint string) http.RoundTripper {
	tr, ok := base.(*http.Transport)
	if !ok || !h1Supported || tr.DisableKeepAlives || tr.ResponseHeaderTimeout != 0 || tr.MaxConnsPerHost > 0 || tr.DialContext == nil && tr.Dial != nil ||
		tr.Protocols != nil && tr.Protocols.UnencryptedHTTP2() {
		return base
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return base
	}
	if tr.Proxy != nil {
		p, err := tr.Proxy(&http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}})
		if err != nil || p != nil {
			return base
		}
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	dial := tr.DialContext
	if dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	maxIdle := tr.MaxIdleConnsPerHost
	if maxIdle <= 0 {
		maxIdle = http.DefaultMaxIdleConnsPerHost
	}
	if tr.MaxIdleConns > 0 { // http.Transport's bound over all hosts
		maxIdle = min(maxIdle, tr.MaxIdleConns)
	}
	maxHeader := tr.MaxResponseHeaderBytes
	if maxHeader <= 0 {
		maxHeader = 10 << 20 // http.Transport's default
	}
	return &h1Transport{base: base, addr: addr, dial: dial, maxIdle: maxIdle, idleFor: tr.IdleConnTimeout, maxHeader: maxHeader}
}

// RoundTrip implements http.RoundTripper.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.URL.Scheme != "http" || canonicalAddr(req.URL) != t.addr ||
		!smallBody(req) {
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	// A request whose context has ended is not sent, as http.Transport
	// checks first: on an idle connection the AfterFunc below sets the
	// deadline from another goroutine, after the request may be written.
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	pc, err := t.get(ctx)
	if err != nil {
		closeBody(req)
		if ctx.Err() != nil { // the dial was aborted: the context's error, as http.Transport gives
			return nil, ctx.Err()
		}
		return nil, err
	}
	// A cancelled request's I/O fails at once, as http.Transport aborts it.
	stop := context.AfterFunc(ctx, func() { _ = pc.c.SetDeadline(aLongTimeAgo) })
	if ctx.Err() != nil { // ended while the connection was got: nothing written yet
		stop()
		pc.c.Close()
		closeBody(req)
		return nil, ctx.Err()
	}
	resp, err := pc.exchange(req, t.maxHeader)
	if err != nil {
		stop()
		pc.c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	// Not reused either after a request that asked to close it or a 101
	// (the connection speaks another protocol now), as http.Transport.
	keep := !resp.Close && !req.Close && resp.StatusCode >= 200
	b := &h1Body{t: t, pc: pc, body: resp.Body, stop: stop, ctx: ctx, keep: keep, sized: resp.ContentLength >= 0}
	b.left.Store(resp.ContentLength)
	if resp.Body == http.NoBody {
		b.eof.Store(true)
	}
	resp.Body = b
	return resp, nil
}

// exchange writes req and reads its response, skipping informational
// (1xx) responses as http.Transport does.
func (pc *h1Conn) exchange(req *http.Request, maxHeader int64) (*http.Response, error) {
	if err := req.Write(pc.bw); err != nil {
		return nil, err
	}
	if err := pc.bw.Flush(); err != nil {
		return nil, err
	}
	// What is buffered already counts against the limit too. The limit is
	// for all the headers of the exchange: informational responses and the
	// final one (as http.Transport counts them), so a server sending 1xx
	// responses without end fails the request.
	pc.lr.n, pc.lr.max = maxHeader-int64(pc.br.Buffered()), maxHeader
	defer func() { pc.lr.n = noLimit }()
	for {
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the server closed the connection before answering
			}
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		resp.Body.Close()
	}
}

// get takes the most recently used live idle connection, or dials one.
func (t *h1Transport) get(ctx context.Context) (*h1Conn, error) {
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		pc := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if pc.alive() {
			return pc, nil
		}
		pc.c.Close()
	}
	c, err := t.dial(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	pc := &h1Conn{c: c, bw: bufio.NewWriter(c)}
	pc.lr = limitReader{r: c, n: noLimit}
	pc.br = bufio.NewReader(&pc.lr)
	return pc, nil
}

// put makes pc idle, or closes it when the pool is full or closed.
func (t *h1Transport) put(pc *h1Conn) {
	pc.idle = time.Now()
	t.mu.Lock()
	if t.closed || len(t.idle) >= t.maxIdle {
		t.mu.Unlock()
		pc.c.Close()
		return
	}
	t.idle = append(t.idle, pc)
	if t.idleFor > 0 && t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleFor, t.expire)
	}
	t.mu.Unlock()
}

// expire closes the connections idle for idleFor or longer, and runs again
// while any stay idle.
func (t *h1Transport) expire() {
	cutoff := time.Now().Add(-t.idleFor)
	t.mu.Lock()
	i := 0
	for i < len(t.idle) && !t.idle[i].idle.After(cutoff) {
		i++
	}
	old := append([]*h1Conn(nil), t.idle[:i]...)
	n := copy(t.idle, t.idle[i:])
	clear(t.idle[n:]) // no closed connection kept from the GC
	t.idle = t.idle[:n]
	t.sweep = nil
	if len(t.idle) > 0 && !t.closed {
		t.sweep = time.AfterFunc(t.idle[0].idle.Add(t.idleFor).Sub(time.Now()), t.expire)
	}
	t.mu.Unlock()
	for _, pc := range old {
		pc.c.Close()
	}
}

// CloseIdleConnections closes the idle connections and every connection
// put back later. The base transport, shared by other upstreams, is left
// alone.
func (t *h1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.closed = nil, true
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, pc := range idle {
		pc.c.Close()
	}
}

// h1Body is a response body on an h1Conn: read to its end and closed, it
// gives the connection back; closed before, it closes the connection.
type h1Body struct {
	t     *h1Transport
	pc    *h1Conn
	body  io.ReadCloser
	stop  func() bool
	ctx   context.Context
	keep  bool         // the response allows reuse
	sized bool         // a Content-Length body
	left  atomic.Int64 // sized: the bytes of the body not read yet
	eof   atomic.Bool
	once  sync.Once
}

func (b *h1Body) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if b.sized {
		b.left.Add(-int64(n))
	}
	switch {
	case err == io.EOF:
		b.eof.Store(true)
	case err != nil && b.ctx.Err() != nil:
		err = b.ctx.Err()
	}
	return n, err
}

func (b *h1Body) Close() error {
	b.once.Do(func() {
		live := b.stop() // false: the request's context ended, the deadline is set
		if !b.eof.Load() && b.sized && b.left.Load() == 0 {
			// Read to its last byte without seeing io.EOF (a reader that
			// knew the length). Counted, not probed with a read: Close may
			// run while another goroutine's Read waits on the connection
			// (drain's timer), and a read here would wait for it, holding
			// the body's lock, instead of ending it.
			b.eof.Store(true)
		}
		if live && b.keep && b.eof.Load() {
			b.t.put(b.pc)
			return
		}
		b.pc.c.Close()
	})
	return nil
}

// smallBody reports whether req's body has a known length of at most
// h1MaxBody (a body with ContentLength 0 that is not NoBody has an unknown
// length, as Request.Write reads it).
func smallBody(req *http.Request) bool {
	if req.ContentLength == 0 {
		return req.Body == nil || req.Body == http.NoBody
	}
	return req.ContentLength > 0 && req.ContentLength <= h1MaxBody
}

// aLongTimeAgo is a deadline in the past: blocked I/O returns at once.
var aLongTimeAgo = time.Unix(1, 0)

// canonicalAddr is u's host:port, the port defaulted for http.
func canonicalAddr(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
