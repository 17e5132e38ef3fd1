package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Run supervises the upstream until ctx ends: connect, fetch the catalog,
// report up, watch (ping or process exit), and on failure report down and
// reconnect with backoff. When it returns the upstream reports down, every
// session has been handed to the Closer, and no goroutine Run started is
// left (session closers belong to the Closer). Call it once.
func (u *Upstream) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { u.sweep(ctx) })
	delay := u.opts.BackoffMin
	for {
		g, err := u.connect(ctx)
		if err == nil {
			err = u.serve(ctx, g, &delay)
		}
		if ctx.Err() != nil {
			u.release(g)
			break
		}
		u.setState(&snapshot{err: errText(err)})
		u.stopTTL(false)
		u.release(g)
		if !sleep(ctx, delay) {
			break
		}
		u.restarts.Add(1)
		delay = min(2*delay, u.opts.BackoffMax)
	}
	u.stop()
	wg.Wait()
	if t, ok := u.base.(*h1Transport); ok {
		t.CloseIdleConnections() // later exchanges (a closing session's) close theirs
	}
}

// serve catalogues a connected generation, reports it up (resetting the
// backoff) and watches it; it returns why it stopped serving.
func (u *Upstream) serve(ctx context.Context, g *generation, delay *time.Duration) error {
	if err := u.refreshCatalog(ctx, g.procs, allKinds, false); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	u.setState(&snapshot{up: true, procs: g.procs})
	*delay = u.opts.BackoffMin
	return u.watch(ctx, g)
}

// generation is what one successful connect produced.
type generation struct {
	procs []*session // stdio processes; nil for HTTP (the pool is u.pool)
	exits chan error // stdio: one value per process that exited
}

func (u *Upstream) connect(ctx context.Context) (*generation, error) {
	if u.isHTTP() {
		_, err := u.pool.get(ctx)
		return &generation{}, err
	}
	g := &generation{exits: make(chan error, u.opts.Spec.Processes)}
	for range u.opts.Spec.Processes {
		s, err := u.dial(ctx, nil, nil)
		if err != nil {
			u.release(g)
			return nil, err
		}
		g.procs = append(g.procs, s)
		u.closer.Go(func() { g.exits <- s.cs.Wait() })
	}
	return g, nil
}

// release closes what a generation holds: the stdio processes, or the HTTP
// pool session and every dedicated session (after an outage they are as
// good as dead).
func (u *Upstream) release(g *generation) {
	if u.isHTTP() {
		if s := u.pool.current(); s != nil {
			u.pool.drop(s)
		}
		u.closeDedicated()
		return
	}
	if g != nil {
		for _, s := range g.procs {
			u.closer.close(s)
		}
	}
}

// stop marks the upstream stopped and down, and closes every session.
func (u *Upstream) stop() {
	u.mu.Lock()
	u.stopped = true
	u.mu.Unlock()
	u.setState(&snapshot{err: errStopped.Error()})
	u.stopTTL(true)
	u.pool.kill()
	u.closeDedicated()
}

// watch returns why a connected generation stopped serving.
func (u *Upstream) watch(ctx context.Context, g *generation) error {
	var tick <-chan time.Time
	if u.isHTTP() {
		t := time.NewTicker(u.opts.PingInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-g.exits:
			return fmt.Errorf("process exited: %v", orEOF(err))
		case <-tick:
			if err := u.ping(ctx); err != nil {
				return err
			}
		case <-u.check:
			if err := u.ping(ctx); err != nil {
				return err
			}
		case <-u.kick:
			// A list_changed refresh is stamped Notified; a ttlMs one is
			// not (nothing announced a change).
			changed := u.dirty.Swap(0)
			stale := u.expired.Swap(0) &^ changed
			for _, r := range []struct {
				kinds    uint32
				notified bool
			}{{changed, true}, {stale, false}} {
				if err := u.refreshCatalog(ctx, g.procs, r.kinds, r.notified); err != nil && ctx.Err() == nil {
					u.log.Warn("list refresh failed", proto.LogErr, err)
				}
			}
		}
	}
}

// ping probes the pool session (HTTP), reopening it once if the server
// forgot it.
func (u *Upstream) ping(ctx context.Context) error {
	if !u.isHTTP() {
		return nil
	}
	for attempt := 0; ; attempt++ {
		s, err := u.pool.get(ctx)
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, u.opts.PingTimeout)
		err = u.probe(pctx, s)
		cancel()
		if err == nil {
			u.pings.Add(1)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		u.pool.drop(s)
		if !errors.Is(err, mcp.ErrSessionMissing) || attempt > 0 {
			return fmt.Errorf("ping: %w", err)
		}
	}
}

// probe checks that the upstream answers on s. Protocol 2026-07-28 has no
// ping (a 2026 server answers "method not found"), so a sessionless pool
// is probed with server/discover: a throwaway client session whose Connect
// is that one request (no handlers, so no subscriptions/listen stream).
func (u *Upstream) probe(ctx context.Context, s *session) error {
	if ir := s.cs.InitializeResult(); ir == nil || ir.ProtocolVersion < protocol2026 {
		return s.cs.Ping(ctx, nil)
	}
	t := &mcp.StreamableClientTransport{
		Endpoint:             u.opts.Spec.URL,
		HTTPClient:           u.httpClient(u.withAuth(u.baseTransport(), s)),
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}
	cs, err := u.prober.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	// A 2026 session holds nothing; one that fell back to initialize has a
	// server session to delete.
	u.closer.close(&session{cs: cs, end: func() {}})
	return nil
}

func orEOF(err error) error {
	if err == nil {
		return errors.New("EOF")
	}
	return err
}

// sleep waits d or until ctx ends; it reports whether d passed.
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
