package upstream

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one upstream MCP session with its lifetime: end aborts its
// HTTP requests and streams, or kills its process. raw is the raw
// tools/call path of a streamable HTTP session (nil for other transports).
// The fields before mu are set by dial before the session is handed out
// (owner before it connects: the upstream's messages may arrive during
// the handshake).
type session struct {
	cs   *mcp.ClientSession
	end  context.CancelFunc
	raw  *rawConn  // streamable HTTP with raw calls
	pipe *pipeConn // stdio with raw calls
	// owner is the client session a dedicated session serves; nil for a
	// shared one (the HTTP pool, a stdio process).
	owner *sessKey
	// routed: the session's connection routes the upstream's messages
	// itself (routeConn), so the SDK client's middleware leaves them alone.
	routed bool
	// creds are the headers injected into the session's HTTP requests,
	// read when it was opened (auth.go); nil: none.
	creds http.Header
	// clientAuth is set on a dedicated session of a passthrough upstream:
	// its client's latest Authorization (nil until a call brings one),
	// sent on the session's own requests (auth.go).
	clientAuth *atomic.Pointer[string]

	mu       sync.Mutex
	inflight map[*callState]struct{}         // guarded by mu: the calls running on the session
	subs     map[string]map[sessKey]struct{} // guarded by mu: a shared session's resources/subscribe'd URIs, by client session

	// levelMu serializes the logging/setLevel the worker sends on the
	// session (levels.go); level is the one set last ("": none yet).
	levelMu sync.Mutex
	level   string // guarded by levelMu
}

var errSessionGone = errors.New("session closed")

// lazy is a session opened on first use and reopened after a drop. One
// caller dials while concurrent callers wait for it. Safe for concurrent
// use.
type lazy struct {
	dial  func(context.Context) (*session, error)
	close func(*session)

	inflight atomic.Int32 // calls using the session now
	lastUsed atomic.Int64 // Unix nanoseconds

	mu   sync.Mutex
	cur  *session      // guarded by mu
	wait chan struct{} // guarded by mu: closed when the dial in progress ends
	err  error         // guarded by mu: the last dial's error
	dead bool          // guarded by mu: killed; never dials again
}

// get returns the current session, dialling one if there is none.
func (l *lazy) get(ctx context.Context) (*session, error) {
	for {
		l.mu.Lock()
		switch {
		case l.dead:
			l.mu.Unlock()
			return nil, errSessionGone
		case l.cur != nil:
			s := l.cur
			l.mu.Unlock()
			return s, nil
		case l.wait != nil:
			w := l.wait
			l.mu.Unlock()
			if err := l.await(ctx, w); err != nil {
				return nil, err
			}
			continue
		}
		w := make(chan struct{})
		l.wait = w
		l.mu.Unlock()
		return l.dialNow(ctx, w)
	}
}

// await waits for another caller's dial. It returns that dial's error,
// unless the dial failed only because the dialler's ctx ended (then the
// waiter tries itself).
func (l *lazy) await(ctx context.Context, w chan struct{}) error {
	select {
	case <-w:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.mu.Lock()
	err := l.err
	l.mu.Unlock()
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

func (l *lazy) dialNow(ctx context.Context, w chan struct{}) (*session, error) {
	s, err := l.dial(ctx)
	l.mu.Lock()
	l.wait, l.err = nil, err
	if err == nil && l.dead {
		l.close(s)
		s, err = nil, errSessionGone
	}
	if err == nil {
		l.cur = s
	}
	l.mu.Unlock()
	close(w)
	return s, err
}

// current returns the open session, or nil.
func (l *lazy) current() *session {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// drop closes s if it is still the current session; the next get dials
// anew.
func (l *lazy) drop(s *session) {
	l.mu.Lock()
	hit := l.cur == s && s != nil
	if hit {
		l.cur = nil
	}
	l.mu.Unlock()
	if hit {
		l.close(s)
	}
}

// kill closes the current session and stops all future dials.
func (l *lazy) kill() {
	l.mu.Lock()
	s := l.cur
	l.cur, l.dead = nil, true
	l.mu.Unlock()
	l.close(s)
}

// use marks the start of a call; the returned func marks its end.
func (l *lazy) use() func() {
	l.inflight.Add(1)
	l.lastUsed.Store(time.Now().UnixNano())
	return func() {
		l.lastUsed.Store(time.Now().UnixNano())
		l.inflight.Add(-1)
	}
}

// idle reports whether the session has had no call for d.
func (l *lazy) idle(now time.Time, d time.Duration) bool {
	return l.inflight.Load() == 0 && now.Sub(time.Unix(0, l.lastUsed.Load())) >= d
}
