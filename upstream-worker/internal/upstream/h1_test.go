package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// h1Server is a scripted HTTP/1.1 server on raw TCP: answer writes the
// response to each request (it may also close the connection). It counts
// connections and closed ones.
type h1Server struct {
	ln     net.Listener
	conns  atomic.Int32
	closed atomic.Int32 // connections the client closed (EOF seen)
	bodies chan string  // request bodies, in order
}

func newH1Server(t *testing.T, answer func(c net.Conn, req *http.Request, n int)) *h1Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h1Server{ln: ln, bodies: make(chan string, 100)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						if errors.Is(err, io.EOF) {
							s.closed.Add(1)
						}
						return
					}
					b, _ := io.ReadAll(req.Body)
					s.bodies <- string(b)
					answer(c, req, n)
				}
			}()
		}
	}()
	return s
}

func (s *h1Server) url() string { return "http://" + s.ln.Addr().String() + "/mcp" }

func newTestH1(t *testing.T, endpoint string, tune func(*http.Transport)) *h1Transport {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tune != nil {
		tune(tr)
	}
	h, ok := newH1Transport(tr, endpoint).(*h1Transport)
	if !ok {
		t.Fatal("no h1Transport for a plain-HTTP upstream")
	}
	t.Cleanup(h.CloseIdleConnections)
	return h
}

// post sends body and returns the response body read to its end.
func post(ctx context.Context, rt http.RoundTripper, endpoint, body string) (*http.Response, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

const sseAnswer = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
	"1e\r\nevent: message\ndata: {\"a\":1}\n\n\r\n0\r\n\r\n"

// TestH1TransportExchanges: each response shape is read whole, and the
// connection is reused exactly when the response allows it.
func TestH1TransportExchanges(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
		reuse              bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}", `{"a":1}`, true},
		{"chunked-sse", sseAnswer, "event: message\ndata: {\"a\":1}\n\n", true},
		{"accepted-empty", "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", "", true},
		{"early-hints-first", "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", true},
		{"connection-close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "ok", false},
		{"http-1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) { io.WriteString(c, tc.answer) })
			h := newTestH1(t, s.url(), nil)
			for i := range 3 {
				_, got, err := post(t.Context(), h, s.url(), `{"i":1}`)
				if err != nil || got != tc.want {
					t.Fatalf("exchange %d: %q, %v; want %q", i, got, err, tc.want)
				}
				if b := <-s.bodies; b != `{"i":1}` {
					t.Fatalf("the server read %q", b)
				}
			}
			want := int32(3)
			if tc.reuse {
				want = 1
			}
			if n := s.conns.Load(); n != want {
				t.Fatalf("3 exchanges on %d connections, want %d", n, want)
			}
		})
	}
}

// TestH1TransportStaleIdle: a connection the server closed while it sat
// idle is not used; the next POST goes out on a new one and succeeds.
func TestH1TransportStaleIdle(t *testing.T) {
	shut := make(chan struct{}, 3)
	s := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		c.Close() // no Connection: close: the client learns it from the socket
		shut <- struct{}{}
	})
	h := newTestH1(t, s.url(), nil)
	for i := range 3 {
		if _, got, err := post(t.Context(), h, s.url(), "{}"); err != nil || got != "ok" {
			t.Fatalf("exchange %d: %q, %v", i, got, err)
		}
		<-s.bodies
		recv(t, shut, "the server to close")
		time.Sleep(50 * time.Millisecond) // the FIN reaches the idle socket
	}
	if n := s.conns.Load(); n != 3 {
		t.Fatalf("%d connections, want 3", n)
	}
}

// TestH1TransportCancel: a request whose context ends while the response
// is awaited fails with the context's error, and its connection is closed
// rather than reused.
func TestH1TransportCancel(t *testing.T) {
	release := make(chan struct{})
	var reqs atomic.Int32
	s := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) {
		if reqs.Add(1) == 1 {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
			<-release // the body never comes
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	defer close(release)
	h := newTestH1(t, s.url(), nil)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url(), strings.NewReader("{}"))
	resp, err := h.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		<-s.bodies
		cancel()
	}()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Fatalf("reading the cancelled response: %v", err)
	}
	resp.Body.Close()
	if _, got, err := post(t.Context(), h, s.url(), "{}"); err != nil || got != "ok" {
		t.Fatalf("the next exchange: %q, %v", got, err)
	}
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the cancelled one closed)", n)
	}
	// A context already ended fails before any I/O.
	if _, _, err := post(ctx, h, s.url(), "{}"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a request on an ended context: %v", err)
	}
}

// TestH1TransportEarlyClose: a body closed before its end closes the
// connection; the next exchange dials.
func TestH1TransportEarlyClose(t *testing.T) {
	s := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) { io.WriteString(c, sseAnswer) })
	h := newTestH1(t, s.url(), nil)
	req, _ := http.NewRequest(http.MethodPost, s.url(), strings.NewReader("{}"))
	resp, err := h.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, got, err := post(t.Context(), h, s.url(), "{}"); err != nil || !strings.Contains(got, "data:") {
		t.Fatalf("the next exchange: %q, %v", got, err)
	}
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// TestH1TransportLimits: an endless response header fails the request
// naming the limit; the server closing without an answer is an error.
func TestH1TransportLimits(t *testing.T) {
	s := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 64<<10)+"\r\n\r\n")
	})
	h := newTestH1(t, s.url(), func(tr *http.Transport) { tr.MaxResponseHeaderBytes = 16 << 10 })
	if _, _, err := post(t.Context(), h, s.url(), "{}"); err == nil || !strings.Contains(err.Error(), "exceeded 16384 bytes") {
		t.Fatalf("a 64 KiB header against a 16 KiB limit: %v", err)
	}
	gone := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) { c.Close() })
	h = newTestH1(t, gone.url(), nil)
	if _, _, err := post(t.Context(), h, gone.url(), "{}"); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("no answer: %v", err)
	}
}

// TestH1TransportIdleExpiry: an idle connection is closed after the base
// transport's IdleConnTimeout.
func TestH1TransportIdleExpiry(t *testing.T) {
	s := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	h := newTestH1(t, s.url(), func(tr *http.Transport) { tr.IdleConnTimeout = 20 * time.Millisecond })
	if _, _, err := post(t.Context(), h, s.url(), "{}"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the idle connection to be closed", func() bool { return s.closed.Load() == 1 })
	if _, _, err := post(t.Context(), h, s.url(), "{}"); err != nil {
		t.Fatal(err)
	}
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// TestH1TransportOthersToBase: requests that are not plain-HTTP POSTs to
// the upstream with a body of known, small length go to the base
// transport.
func TestH1TransportOthersToBase(t *testing.T) {
	var base atomic.Int32
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		base.Add(1)
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	})
	h := &h1Transport{base: rt, addr: "127.0.0.1:1"}
	for _, r := range []*http.Request{
		httptestRequest(http.MethodGet, "http://127.0.0.1:1/mcp"),
		httptestRequest(http.MethodDelete, "http://127.0.0.1:1/mcp"),
		httptestRequest(http.MethodPost, "http://127.0.0.1:2/mcp"),
		httptestRequest(http.MethodPost, "https://127.0.0.1:1/mcp"),
		unknownLength(http.MethodPost, "http://127.0.0.1:1/mcp"),
	} {
		if _, err := h.RoundTrip(r); err != nil {
			t.Fatal(err)
		}
	}
	if n := base.Load(); n != 5 {
		t.Fatalf("%d of 5 requests reached the base transport", n)
	}
}

// TestNewH1Transport: the h1Transport is used only where http.Transport
// would speak plain HTTP/1.1 to the upstream itself.
func TestNewH1Transport(t *testing.T) {
	proxy := func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy:3128") }
	h2c := new(http.Protocols)
	h2c.SetUnencryptedHTTP2(true)
	for _, tc := range []struct {
		name     string
		endpoint string
		base     http.RoundTripper
		want     bool
	}{
		{"default", "http://127.0.0.1:3001/mcp", http.DefaultTransport.(*http.Transport).Clone(), true},
		{"default port", "http://mcp.example/mcp", &http.Transport{}, true},
		{"tls", "https://mcp.example/mcp", &http.Transport{}, false},
		{"proxy", "http://mcp.example/mcp", &http.Transport{Proxy: proxy}, false},
		{"no keep-alives", "http://mcp.example/mcp", &http.Transport{DisableKeepAlives: true}, false},
		{"h2c", "http://mcp.example/mcp", &http.Transport{Protocols: h2c}, false},
		{"header timeout", "http://mcp.example/mcp", &http.Transport{ResponseHeaderTimeout: time.Second}, false},
		{"max conns per host", "http://mcp.example/mcp", &http.Transport{MaxConnsPerHost: 8}, false},
		{"custom round tripper", "http://mcp.example/mcp", roundTripFunc(nil), false},
	} {
		_, got := newH1Transport(tc.base, tc.endpoint).(*h1Transport)
		if got != tc.want {
			t.Errorf("%s: h1Transport %v, want %v", tc.name, got, tc.want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// unknownLength is a request whose body has no known length.
func unknownLength(method, target string) *http.Request {
	r, err := http.NewRequest(method, target, io.NopCloser(strings.NewReader("{}")))
	if err != nil {
		panic(err)
	}
	return r
}

func httptestRequest(method, target string) *http.Request {
	r, err := http.NewRequest(method, target, bytes.NewReader(nil))
	if err != nil {
		panic(err)
	}
	return r
}

// hookConn is a client connection that counts the writes started on it
// and reports each read started (on reads, when there is room).
type hookConn struct {
	net.Conn
	writes atomic.Int32
	reads  chan struct{}
}

func (c *hookConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func (c *hookConn) Read(p []byte) (int, error) {
	select {
	case c.reads <- struct{}{}:
	default:
	}
	return c.Conn.Read(p)
}

// hookDial makes tr dial hookConns, each sent on conns.
func hookDial(tr *http.Transport, conns chan<- *hookConn) {
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		hc := &hookConn{Conn: c, reads: make(chan struct{}, 16)}
		conns <- hc
		return hc, nil
	}
}

// TestH1TransportCloseWhileReading: closing a Content-Length body from
// another goroutine while a Read waits for the rest of it (drain's timer)
// returns at once and ends that Read, as with http.Transport.
func TestH1TransportCloseWhileReading(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 100\r\n\r\ndata: x\n\n")
		<-release // the other 91 bytes never come
	})
	conns := make(chan *hookConn, 4)
	h := newTestH1(t, s.url(), func(tr *http.Transport) { hookDial(tr, conns) })
	req, _ := http.NewRequest(http.MethodPost, s.url(), strings.NewReader("{}"))
	resp, err := h.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	hc := recv(t, conns, "the dial")
	var buf [64]byte
	if _, err := io.ReadFull(resp.Body, buf[:9]); err != nil {
		t.Fatal(err)
	}
	for len(hc.reads) > 0 {
		<-hc.reads
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(buf[:])
		readErr <- err
	}()
	recv(t, hc.reads, "the Read to wait on the connection")
	closed := make(chan struct{})
	go func() {
		resp.Body.Close()
		close(closed)
	}()
	recv(t, closed, "Close to return while a Read waits")
	if err := recv(t, readErr, "the Read to end"); err == nil {
		t.Fatal("the waiting Read succeeded after Close")
	}
}

// TestH1TransportEndedContext: a request whose context has ended is not
// written, not even on an idle connection (http.Transport checks first);
// a dial that fails because the context ended gives the context's error.
func TestH1TransportEndedContext(t *testing.T) {
	s := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	conns := make(chan *hookConn, 4)
	h := newTestH1(t, s.url(), func(tr *http.Transport) { hookDial(tr, conns) })
	if _, got, err := post(t.Context(), h, s.url(), "{}"); err != nil || got != "ok" {
		t.Fatalf("first exchange: %q, %v", got, err)
	}
	hc := recv(t, conns, "the dial")
	before := hc.writes.Load()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := post(ctx, h, s.url(), "{}"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a request on an ended context: %v", err)
	}
	if n := hc.writes.Load() - before; n != 0 {
		t.Fatalf("a request on an ended context was written to the idle connection (%d writes)", n)
	}

	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	h = newTestH1(t, s.url(), func(tr *http.Transport) {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			cancel()
			<-ctx.Done()
			return nil, errors.New("dial interrupted")
		}
	})
	if _, _, err := post(ctx, h, s.url(), "{}"); err != context.Canceled {
		t.Fatalf("a dial ended by the context: %v, want %v", err, context.Canceled)
	}
}

// TestH1TransportInformationalLimit: informational responses count
// against the response header limit together with the final one, as in
// http.Transport: a server sending them without end fails the request.
func TestH1TransportInformationalLimit(t *testing.T) {
	hint := "HTTP/1.1 103 Early Hints\r\nLink: <" + strings.Repeat("x", 1000) + ">\r\n\r\n"
	s := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) {
		io.WriteString(c, strings.Repeat(hint, 40)+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	h := newTestH1(t, s.url(), func(tr *http.Transport) { tr.MaxResponseHeaderBytes = 16 << 10 })
	if _, got, err := post(t.Context(), h, s.url(), "{}"); err == nil || !strings.Contains(err.Error(), "exceeded 16384 bytes") {
		t.Fatalf("40 KiB of 103 responses against a 16 KiB limit: %q, %v", got, err)
	}
}

// TestH1TransportNoReuse: a connection is not reused after a 101 response
// (it speaks another protocol now) or a request that asked to close it,
// even when the response does not say Connection: close.
func TestH1TransportNoReuse(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		close        bool
	}{
		{"switching-protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\nConnection: Upgrade\r\n\r\n", false},
		{"request-close", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newH1Server(t, func(c net.Conn, _ *http.Request, _ int) { io.WriteString(c, tc.answer) })
			h := newTestH1(t, s.url(), nil)
			for i := range 2 {
				req, _ := http.NewRequest(http.MethodPost, s.url(), strings.NewReader("{}"))
				req.Close = tc.close
				resp, err := h.RoundTrip(req)
				if err != nil {
					t.Fatalf("exchange %d: %v", i, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				<-s.bodies
			}
			if n := s.conns.Load(); n != 2 {
				t.Fatalf("2 exchanges on %d connections, want 2", n)
			}
		})
	}
}

// TestH1TransportIdleBound: the idle pool keeps at most what
// http.Transport would for one host: MaxIdleConnsPerHost (default 2),
// within MaxIdleConns when that is set.
func TestH1TransportIdleBound(t *testing.T) {
	for _, tc := range []struct{ perHost, total, want int }{
		{0, 0, http.DefaultMaxIdleConnsPerHost}, {64, 0, 64}, {64, 10, 10}, {4, 10, 4},
	} {
		tr := &http.Transport{MaxIdleConnsPerHost: tc.perHost, MaxIdleConns: tc.total}
		if h := newH1Transport(tr, "http://127.0.0.1:1/mcp").(*h1Transport); h.maxIdle != tc.want {
			t.Errorf("per host %d, total %d: keeps %d idle, want %d", tc.perHost, tc.total, h.maxIdle, tc.want)
		}
	}
}

// TestH1TransportEarlyAnswer: an upstream that answers a large POST without
// reading its body (413) is heard: the request goes to the base transport,
// which reads the answer while it writes, instead of a synchronous write
// that would block on full socket buffers until the call's deadline.
func TestH1TransportEarlyAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
				<-done // never reads the body, holds the connection
			}()
		}
	}()
	endpoint := "http://" + ln.Addr().String() + "/mcp"
	h := newTestH1(t, endpoint, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, _, err := post(ctx, h, endpoint, strings.Repeat("x", 32<<20))
	if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 32 MiB POST answered 413 unread: %v, %v", resp, err)
	}
}
