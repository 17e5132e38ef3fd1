package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/capture"
)

// newLazy returns a lazy session: a shared one (owner nil) or the one
// dedicated to client session *owner, declaring clientCaps (the client's
// capabilities, raw JSON).
func (u *Upstream) newLazy(owner *sessKey, clientCaps []byte) *lazy {
	l := &lazy{close: u.closer.close}
	l.dial = func(ctx context.Context) (*session, error) { return u.dial(ctx, owner, clientCaps) }
	return l
}

// dial opens one upstream session: a shared one (owner nil: the pool, a
// stdio process), or one dedicated to client session *owner, which
// declares that client's capabilities (clientCaps) and asks for 2025-11-25,
// the era of the client sessions it mirrors. When such a session gets no
// session id (the upstream keeps no state for it: no GET stream, no
// server-to-client requests) and the pool negotiated 2026-07-28, it is
// reopened at 2026-07-28, where the upstream's input requests reach the
// client through the reverse era bridge (bridge.go); later dedicated
// sessions of the upstream go there at once.
func (u *Upstream) dial(ctx context.Context, owner *sessKey, clientCaps []byte) (*session, error) {
	if owner == nil {
		// A stdio process is shared by the client sessions of both eras:
		// it speaks 2025-11-25, under which a server's tools may still ask
		// the client for input mid-call (a 2026-07-28 session refuses that
		// to tools not written for input_required results), and the edge
		// bridges for 2026-era clients. The HTTP pool takes the latest the
		// upstream knows (a stateless upstream speaks only 2026-07-28).
		version := ""
		if !u.isHTTP() {
			switch u.opts.StdioVersion {
			case "":
				version = legacyProtocol
			case "latest":
			default:
				version = u.opts.StdioVersion
			}
		}
		return u.open(ctx, nil, u.shared, version)
	}
	caps := parseCaps(clientCaps)
	if u.dedicated2026.Load() {
		return u.open(ctx, owner, caps, "")
	}
	s, err := u.open(ctx, owner, caps, legacyProtocol)
	if err != nil || s.cs.ID() != "" || !u.poolSpeaks2026() {
		return s, err
	}
	u.closer.close(s)
	u.dedicated2026.Store(true)
	u.log.Debug("upstream keeps no 2025-11-25 sessions: dedicated sessions ask for 2026-07-28")
	return u.open(ctx, owner, caps, "")
}

// poolSpeaks2026 reports whether the HTTP pool session negotiated
// 2026-07-28 or later.
func (u *Upstream) poolSpeaks2026() bool {
	s := u.pool.current()
	if s == nil {
		return false
	}
	ir := s.cs.InitializeResult()
	return ir != nil && ir.ProtocolVersion >= protocol2026
}

// open connects one session declaring caps, asking for version ("" for the
// latest the SDK knows, which tries server/discover first). The handshake
// is bounded by ctx and ConnectTimeout; the session itself lives until it
// is closed (its lifetime context derives from the Closer, not from ctx,
// because the SSE transport ties its stream to the Connect context).
func (u *Upstream) open(ctx context.Context, owner *sessKey, caps *mcp.ClientCapabilities, version string) (*session, error) {
	s := &session{owner: owner}
	if owner != nil && u.Passthrough() {
		// The upstream may bind the session to the user who opened it
		// (the go-sdk's streamable handler refuses a request of another
		// user, 403): the session is its client's, so it opens with the
		// client's Authorization, if the call opening it has one.
		s.clientAuth = new(atomic.Pointer[string])
		s.noteAuth(ctx)
	}
	life, end := context.WithCancel(u.closer.Life())
	t, rawHC, err := u.transport(life, s)
	if err != nil {
		end()
		return nil, err
	}
	stop := context.AfterFunc(ctx, end)
	timer := time.AfterFunc(u.opts.ConnectTimeout, end)
	var so *mcp.ClientSessionOptions
	if version != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := u.newClient(caps, s).Connect(life, t, so)
	stop()
	timedOut := !timer.Stop()
	if err == nil {
		s.cs, s.end = cs, end
	}
	if err == nil && life.Err() != nil { // aborted just as it connected
		u.closer.close(s)
		err = life.Err()
	}
	if err != nil {
		end()
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case timedOut:
			return nil, fmt.Errorf("connect: no answer within %v", u.opts.ConnectTimeout)
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	v := cs.InitializeResult().ProtocolVersion
	head := u.metaHead(v)
	var meta []byte
	if head != nil {
		meta = withCaps(head, capsJSON(caps))
	}
	if rawHC != nil {
		s.raw = u.newRawConn(cs, rawHC, head, meta)
		s.raw.legacyOps = owner != nil && head != nil && s.raw.sid == nil
	}
	if pt, ok := t.(*pipeTransport); ok {
		pt.conn.head, pt.conn.meta = head, meta
		s.pipe = pt.conn
	}
	u.reapplyLevel(ctx, s)
	return s, nil
}

// transport builds the MCP transport of session s, whose lifetime is life.
// For a streamable HTTP session with raw calls it also returns the HTTP
// client of the raw path: the session's own chain (the configured
// transport, cookie jar and redirect policy, aborted when the lifetime
// ends) without the capture.
func (u *Upstream) transport(life context.Context, s *session) (mcp.Transport, *http.Client, error) {
	sp := u.opts.Spec
	if u.isHTTP() {
		// Read at each session's opening: a rotated file is picked up by
		// the next session (auth.go). Missing credentials fail the
		// session rather than connecting without them.
		creds, err := u.loadCreds()
		if err != nil {
			return nil, nil, err
		}
		s.creds = creds
	}
	switch sp.Transport {
	case proto.TransportStreamable:
		// Never wrap the streamable connection (the SDK calls its
		// unexported sessionUpdated): capture on the HTTP bodies instead.
		abort := &abortRT{base: u.withAuth(u.baseTransport(), s), life: life}
		rt := capture.NewRoundTripper(abort, u.opts.MaxResultBytes)
		t := &mcp.StreamableClientTransport{Endpoint: sp.URL, HTTPClient: u.httpClient(rt)}
		if !u.rawCalls {
			return t, nil, nil
		}
		return t, u.httpClient(abort), nil
	case proto.TransportSSE:
		hc := u.httpClient(&abortRT{base: u.withAuth(u.baseTransport(), s), life: life})
		t := capture.WrapTransport(&mcp.SSEClientTransport{Endpoint: sp.URL, HTTPClient: hc, MaxEventSize: u.opts.MaxResultBytes})
		s.routed = true
		return &relayTransport{inner: t, route: u.router(s)}, nil, nil
	case proto.TransportStdio:
		if len(sp.Command) == 0 {
			return nil, nil, errors.New("stdio upstream without a command")
		}
		// CommandContext kills the process when the lifetime ends.
		cmd, err := u.stdioCommand(life)
		if err != nil {
			return nil, nil, err
		}
		// The lifetime's end kills the whole process group.
		cmd.Cancel = func() error { return killGroup(cmd, syscall.SIGKILL) }
		stderr := &lineLog{log: u.log}
		cmd.Stderr = stderr
		cmd.WaitDelay = stdioTerminate
		limit := int(sp.MaxMessageBytes)
		if limit <= 0 {
			limit = max(u.opts.MaxResultBytes, mcp.DefaultMaxLineLength)
		}
		st := &stdioTransport{cmd: cmd, terminate: stdioTerminate, name: u.name, limit: limit, skip: u.skipLine}
		if sb := sp.Sandbox; sb != nil {
			st.diagnose = func(ps *os.ProcessState) error {
				if le := limitHit(sb, ps, stderr.lastLines()); le != nil {
					u.log.Warn("stdio server ended on its sandbox limit; restarting it", "limit", le.limit, "value", le.value)
					return le
				}
				return nil
			}
		}
		t := capture.WrapTransport(st)
		s.routed = true
		if !u.rawCalls {
			return &relayTransport{inner: t, route: u.router(s)}, nil, nil
		}
		return &pipeTransport{inner: t, stdio: st, route: u.router(s)}, nil, nil
	}
	return nil, nil, fmt.Errorf("unknown transport %q", sp.Transport)
}

// baseTransport is the upstream's HTTP transport: the configured client's
// (or http.DefaultTransport), behind an h1Transport for a plain-HTTP
// upstream it reaches directly (newH1Transport), which sends the small
// POSTs itself.
func (u *Upstream) baseTransport() http.RoundTripper {
	return u.base
}

// httpClient is a per-session client over rt, keeping the configured
// client's redirect policy and cookie jar.
func (u *Upstream) httpClient(rt http.RoundTripper) *http.Client {
	base := u.opts.HTTPClient
	return &http.Client{Transport: rt, CheckRedirect: base.CheckRedirect, Jar: base.Jar}
}

// abortRT ties every request of one session to the session's lifetime:
// when it ends, in-flight requests (a slow DELETE on close, a hanging GET
// stream) are aborted.
type abortRT struct {
	base http.RoundTripper
	life context.Context
}

func (a *abortRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if b, ok := r.Context().(*lifeBound); ok && b.rt == a {
		return a.base.RoundTrip(r)
	}
	if a.life.Err() != nil && r.Method == http.MethodGet {
		return endedGET(r), nil
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(a.life, cancel)
	resp, err := a.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		stop()
		cancel()
		if a.life.Err() != nil && r.Method == http.MethodGet {
			return endedGET(r), nil
		}
		return nil, err
	}
	resp.Body = &endBody{ReadCloser: resp.Body, end: func() { stop(); cancel() }}
	return resp, nil
}

// lifeBound is a request context that its maker already ends with the
// session's lifetime (rawCall's POST): abortRT passes its request through
// without a context and a request copy of its own (2% of the gateway's CPU
// per call at 64 connections, in a profile).
type lifeBound struct {
	context.Context
	rt *abortRT
}

// bindLife returns a context derived from ctx, cancelled also when the
// session lifetime of hc's abortRT ends, and the function that cancels and
// releases it. Without an abortRT it is context.WithCancel(ctx).
func bindLife(ctx context.Context, hc *http.Client) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	a, ok := hc.Transport.(*abortRT)
	if !ok {
		return ctx, cancel
	}
	stop := context.AfterFunc(a.life, cancel)
	return &lifeBound{Context: ctx, rt: a}, func() { stop(); cancel() }
}

// endedGET answers a GET of a session whose lifetime has ended: the
// go-sdk client opens its standalone SSE stream with a GET inside Connect,
// on a context of its own, and retries a failed one with backoff (about
// 15 s in all), which would hold a cancelled call's session opening that
// long. 405 is the answer of a server without that stream: the client
// stops at once, and the session is closed by its owner anyway.
func endedGET(r *http.Request) *http.Response {
	return &http.Response{
		StatusCode: http.StatusMethodNotAllowed, Status: "405 Method Not Allowed",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: r,
	}
}

type endBody struct {
	io.ReadCloser
	end func()
}

func (b *endBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}
