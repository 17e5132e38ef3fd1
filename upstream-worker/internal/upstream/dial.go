package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/capture"
)

func (u *Upstream) newLazy(dedicated bool) *lazy {
	l := &lazy{close: u.closer.close}
	l.dial = func(ctx context.Context) (*session, error) { return u.dial(ctx, dedicated) }
	return l
}

// dial opens one upstream session. The handshake is bounded by ctx and
// ConnectTimeout; the session itself lives until it is closed (its
// lifetime context derives from the Closer, not from ctx, because the SSE
// transport ties its stream to the Connect context).
func (u *Upstream) dial(ctx context.Context, dedicated bool) (*session, error) {
	life, end := context.WithCancel(u.closer.Life())
	t, rawHC, err := u.transport(life)
	if err != nil {
		end()
		return nil, err
	}
	stop := context.AfterFunc(ctx, end)
	timer := time.AfterFunc(u.opts.ConnectTimeout, end)
	var so *mcp.ClientSessionOptions
	if dedicated {
		so = &mcp.ClientSessionOptions{ProtocolVersion: legacyProtocol}
	}
	cs, err := u.client.Connect(life, t, so)
	stop()
	timedOut := !timer.Stop()
	if err == nil && life.Err() != nil { // aborted just as it connected
		u.closer.close(&session{cs: cs, end: end})
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
	s := &session{cs: cs, end: end}
	if rawHC != nil {
		s.raw = u.newRawConn(cs, rawHC)
	}
	if pt, ok := t.(*pipeTransport); ok {
		pt.conn.meta = u.requestMeta(cs.InitializeResult().ProtocolVersion)
		s.pipe = pt.conn
	}
	return s, nil
}

// transport builds the MCP transport of one session whose lifetime is life.
// For a streamable HTTP session with raw calls it also returns the HTTP
// client of the raw path: the session's own chain (the configured
// transport, cookie jar and redirect policy, aborted when the lifetime
// ends) without the capture.
func (u *Upstream) transport(life context.Context) (mcp.Transport, *http.Client, error) {
	sp := u.opts.Spec
	switch sp.Transport {
	case proto.TransportStreamable:
		// Never wrap the streamable connection (the SDK calls its
		// unexported sessionUpdated): capture on the HTTP bodies instead.
		abort := &abortRT{base: u.baseTransport(), life: life}
		rt := capture.NewRoundTripper(abort, u.opts.MaxResultBytes)
		t := &mcp.StreamableClientTransport{Endpoint: sp.URL, HTTPClient: u.httpClient(rt)}
		if !u.rawCalls {
			return t, nil, nil
		}
		return t, u.httpClient(abort), nil
	case proto.TransportSSE:
		hc := u.httpClient(&abortRT{base: u.baseTransport(), life: life})
		return capture.WrapTransport(&mcp.SSEClientTransport{Endpoint: sp.URL, HTTPClient: hc, MaxEventSize: u.opts.MaxResultBytes}), nil, nil
	case proto.TransportStdio:
		if len(sp.Command) == 0 {
			return nil, nil, errors.New("stdio upstream without a command")
		}
		// CommandContext kills the process when the lifetime ends.
		cmd := exec.CommandContext(life, sp.Command[0], sp.Command[1:]...)
		cmd.Env = os.Environ()
		for k, v := range sp.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = &lineLog{log: u.log}
		cmd.WaitDelay = stdioTerminate
		t := capture.WrapTransport(&mcp.CommandTransport{Command: cmd, TerminateDuration: stdioTerminate})
		if u.rawCalls {
			t = &pipeTransport{inner: t}
		}
		return t, nil, nil
	}
	return nil, nil, fmt.Errorf("unknown transport %q", sp.Transport)
}

func (u *Upstream) baseTransport() http.RoundTripper {
	if t := u.opts.HTTPClient.Transport; t != nil {
		return t
	}
	return http.DefaultTransport
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
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(a.life, cancel)
	resp, err := a.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	resp.Body = &endBody{ReadCloser: resp.Body, end: func() { stop(); cancel() }}
	return resp, nil
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
