package edge

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The edge's HTTP connections are bounded in number and in time, so that
// slow or idle clients cannot exhaust its file descriptors or memory:
//
//   - capListener accepts at most Config.MaxConnections connections at once;
//     one over the cap is answered 503 with Retry-After and closed;
//   - the header must arrive within ReadHeaderTimeout (net/http), the body
//     within ReadTimeout of the request's start (deadlineBody);
//   - each write to the client must complete within WriteTimeout
//     (deadlineWriter): a client that stops reading a response or an SSE
//     stream is cut, one that reads slowly but steadily is not;
//   - a keep-alive connection idle between requests closes after
//     IdleTimeout (net/http).
//
// The body and write bounds are per request through http.ResponseController
// rather than http.Server's ReadTimeout and WriteTimeout, which bound the
// whole exchange: they would cut every SSE stream (and cancel its
// context) after that long, however healthy.

// capRefusal is what a connection over the cap gets before it is closed:
// a complete HTTP/1.1 response, so that the client sees why.
const capRefusal = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Retry-After: 1\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Connection: close\r\nContent-Length: 40\r\n\r\n" +
	"edge at its connection cap, retry later\n"

// capListener wraps a listener so that at most max connections are open at
// once. Safe for concurrent use.
type capListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func() // counts a refusal; nil: not counted
}

// Accept returns the next connection under the cap; connections over it
// are answered and closed here, and Accept goes on.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			if l.refused != nil {
				l.refused()
			}
			go refuseConn(c)
			continue
		}
		return &capConn{Conn: c, l: l}, nil
	}
}

// refuseConn answers c with capRefusal and closes it, spending at most a
// second on a client that does not read.
func refuseConn(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(c, capRefusal)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		// Drain what the client sent, so that the close does not reset
		// the connection before it reads the response.
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}
	_ = c.Close()
}

// capConn releases its place under the cap once, on its first Close.
type capConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *capConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// defaultMaxConnections is the connection cap for a process allowed nofile
// open files: three quarters of them (the rest for NATS, upstream-facing
// files and the runtime), at most 16,384, at least 64.
func defaultMaxConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	n := rl.Cur / 4 * 3
	return int(max(min(n, 16384), 64))
}

// errBodyTimeout is the body read's error once ReadTimeout has passed.
var errBodyTimeout = errors.New("request body not received within the read timeout")

// deadlineBody bounds the read of a request body: the connection's read
// deadline is the request's start plus the read timeout until the body
// ends (EOF or Close), then cleared, so that net/http's background read of
// a long response (an SSE stream) does not time out and cancel it.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.done {
		b.done = true
		if err == io.EOF {
			_ = b.rc.SetReadDeadline(time.Time{})
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			err = errBodyTimeout
		}
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	if !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return b.ReadCloser.Close()
}

// deadlineWriter gives each write to the client, and each flush, its own
// deadline of timeout from its start. It keeps the writer's optional
// interfaces: Flush, and Unwrap for http.ResponseController.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	last    time.Time // when the deadline was last set; refreshed at most every timeout/4
}

func (w *deadlineWriter) arm() {
	// Setting a deadline takes the poller's lock; a response written in
	// many small pieces refreshes it only when a quarter of it is used.
	now := time.Now()
	if now.Sub(w.last) < w.timeout/4 {
		return
	}
	w.last = now
	_ = w.rc.SetWriteDeadline(now.Add(w.timeout))
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Flush() {
	w.arm()
	_ = w.rc.Flush()
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withDeadlines wraps h so that each request's body and each write get
// their bounds (see above). A zero read or write timeout leaves that side
// unbounded.
func withDeadlines(h http.Handler, read, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if read > 0 && r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(read))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		if write > 0 {
			// Armed now, so that what net/http writes for the request
			// (100 Continue) is not held to an earlier request's deadline.
			dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: write}
			dw.arm()
			w = dw
		}
		h.ServeHTTP(w, r)
	})
}
