package limit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/stale"
	"github.com/switchyard-mcp/switchyard/proto"
)

// BucketEdges is the KV bucket of live edges: key the edge id, value
// [Announcement] as JSON. It lives in memory; its TTL (a few heartbeats)
// clears the keys of edges that stopped without deleting theirs.
const BucketEdges = proto.BucketEdges

// Announcement is the value an edge puts under its id in [BucketEdges].
type Announcement struct {
	// HeartbeatMs is the edge's put interval: a member silent for
	// [proto.HeartbeatMisses] of them is gone.
	HeartbeatMs int64 `json:"heartbeatMs"`
}

// FleetConfig configures a [Fleet]. Zero durations mean their defaults.
type FleetConfig struct {
	// ID is this edge's id, a slug ([proto.ValidSlug]): its key in the
	// bucket. Required.
	ID string
	// Heartbeat is how often the edge puts its key, which also checks
	// that the KV answers. Default 1s; at most the bucket's TTL over
	// proto.HeartbeatMisses (the bucket is provisioned for a 1s
	// heartbeat: internal/provision.EdgeHeartbeat).
	Heartbeat time.Duration
	// OpTimeout bounds each JetStream request (open, put, delete).
	// Default 2s.
	OpTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between attempts after a
	// failure. Default 50ms and 1s.
	RetryMin, RetryMax time.Duration
}

// Fleet keeps this edge's [View] of the live edges from KV [BucketEdges]:
// [Fleet.Run] puts the edge's key every heartbeat and watches the bucket.
// A member is live from its first put until its key is deleted (a clean
// stop) or it misses [proto.HeartbeatMisses] of its heartbeats, as timed
// by this edge's clock on receipt; the bucket's TTL, created as that
// many of this edge's heartbeats, only clears the storage. The edge
// itself is always a member.
//
// # Errors and staleness
//
// When the KV stops answering (a put fails, the watch ends, NATS is
// disconnected), the Fleet turns stale ([Fleet.Stale]) and keeps the last
// View, without expiring anyone: it cannot see the others' heartbeats,
// and dropping them would grow its share past its part. It retries with
// backoff and publishes a new View, and clears stale, once the bucket has
// been read again.
//
// Until the first read, View is this edge alone and Ready is false: an
// edge should not take traffic before Ready, or it would enforce the
// whole limits on its own.
//
// View, Ready and Stale are safe for concurrent use; Run is called once.
type Fleet struct {
	js   jetstream.JetStream
	cfg  FleetConfig
	log  *slog.Logger
	self []byte // the Announcement put every heartbeat

	view  atomic.Pointer[View]
	ready atomic.Bool
	ran   atomic.Bool

	st stale.State

	stops sync.WaitGroup // watchers being stopped in the background
}

// member is one live edge as the Run goroutine tracks it.
type member struct {
	seen time.Time     // last put received
	ttl  time.Duration // silence after which it is gone
}

var (
	errFleetNotStarted = errors.New("not started")
	errFleetLoading    = errors.New("loading")
	errFleetStopped    = errors.New("stopped")
	errFleetDisconn    = errors.New("nats connection lost")
)

// NewFleet returns a Fleet for the edge cfg.ID, using js. It starts
// nothing and does no I/O. It returns an error for an ID that is not a
// slug or a negative duration; a nil logger discards; it panics if js is
// nil.
func NewFleet(js jetstream.JetStream, cfg FleetConfig, log *slog.Logger) (*Fleet, error) {
	if js == nil {
		panic("limit: nil jetstream")
	}
	if !proto.ValidSlug(cfg.ID) {
		return nil, fmt.Errorf("limit: fleet id %q is not a slug", cfg.ID)
	}
	if cfg.Heartbeat < 0 || cfg.OpTimeout < 0 || cfg.RetryMin < 0 || cfg.RetryMax < 0 {
		return nil, errors.New("limit: fleet durations must not be negative")
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = 2 * time.Second
	}
	if cfg.RetryMin == 0 {
		cfg.RetryMin = 50 * time.Millisecond
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = time.Second
	}
	cfg.RetryMax = max(cfg.RetryMax, cfg.RetryMin)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	self, err := json.Marshal(Announcement{HeartbeatMs: cfg.Heartbeat.Milliseconds()})
	if err != nil {
		return nil, err
	}
	f := &Fleet{
		js:   js,
		cfg:  cfg,
		log:  log.With(proto.LogComponent, "limit-fleet", proto.LogEdge, cfg.ID),
		self: self,
	}
	f.st.Restart(errFleetNotStarted)
	f.view.Store(NewView(cfg.ID, nil))
	return f, nil
}

// View returns the current membership: never nil; this edge alone until
// the first read; the last one read while stale. It does not allocate.
// A nil Fleet is an edge alone.
func (f *Fleet) View() *View {
	if f == nil {
		return alone
	}
	return f.view.Load()
}

// Ready reports whether the bucket has been read once, with this edge's
// key in it. It stays true while stale and turns false when Run returns.
func (f *Fleet) Ready() bool { return f.ready.Load() }

// Stale reports whether View may lag the fleet: from NewFleet until the
// first read, and from any failure until the bucket is read again. since
// is when it turned stale; reason the latest failure, for health.
func (f *Fleet) Stale() (stale bool, since time.Time, reason string) { return f.st.Get() }

// Run announces the edge and watches the bucket until ctx ends, retrying
// after every failure; then it deletes the edge's key (bounded by
// OpTimeout), so the others grow their shares at once, and returns nil,
// with every goroutine it started exited. It returns an error only if
// called twice. Cancel it after the edge's calls in flight have ended
// (the others take over this edge's share as soon as the key is gone)
// and before draining the NATS connection.
func (f *Fleet) Run(ctx context.Context) error {
	if !f.ran.CompareAndSwap(false, true) {
		return errors.New("limit: fleet Run called twice")
	}
	defer f.stops.Wait()
	defer func() {
		f.ready.Store(false)
		f.setStale(errFleetStopped)
	}()
	f.st.Restart(errFleetLoading)
	var announced bool
	backoff := f.cfg.RetryMin
	for {
		synced, err := f.session(ctx, &announced)
		if ctx.Err() != nil {
			f.leave(context.WithoutCancel(ctx), announced)
			return nil
		}
		f.setStale(err)
		if synced {
			backoff = f.cfg.RetryMin
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			f.leave(context.WithoutCancel(ctx), announced)
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, f.cfg.RetryMax)
	}
}

// leave deletes the edge's key, if it was ever put and NATS is there to
// hear it.
func (f *Fleet) leave(ctx context.Context, announced bool) {
	if !announced || !f.js.Conn().IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.OpTimeout)
	defer cancel()
	kv, err := f.js.KeyValue(ctx, BucketEdges)
	if err == nil {
		err = kv.Delete(ctx, f.cfg.ID)
	}
	if err != nil {
		f.log.Warn("fleet leave failed, the others drop this edge after its heartbeats", proto.LogErr, err)
	}
}

// session announces the edge and watches the bucket once, until ctx ends
// (nil) or a request or the watch fails. synced says whether it read the
// bucket's state.
func (f *Fleet) session(ctx context.Context, announced *bool) (synced bool, err error) {
	nc := f.js.Conn()
	if !nc.IsConnected() {
		return false, errFleetDisconn
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kv, err := f.bucket(ctx)
	if err != nil {
		return false, err
	}
	if err := f.put(ctx, kv); err != nil {
		return false, err
	}
	*announced = true
	// nats.go ends the watch with the context its consumer was created
	// with; the watchdog cancels it if the set-up's reply is lost.
	watchdog := time.AfterFunc(f.cfg.OpTimeout, cancel)
	kw, err := kv.WatchAll(ctx)
	if !watchdog.Stop() {
		err = errors.Join(err, context.DeadlineExceeded)
	}
	if err != nil {
		if kw != nil {
			f.stopWatch(kw)
		}
		return false, fmt.Errorf("watch bucket %s: %w", BucketEdges, err)
	}
	defer f.stopWatch(kw)

	members := map[string]member{}
	tick := time.NewTicker(f.cfg.Heartbeat)
	defer tick.Stop()
	// A load that stops short of the current values (an end-of-history
	// marker never sent) fails the session.
	stall := time.NewTimer(f.cfg.OpTimeout)
	defer stall.Stop()
	stalled := stall.C
	updates := kw.Updates()
	for {
		select {
		case <-ctx.Done():
			return synced, nil
		case e, ok := <-updates:
			if !ok {
				return synced, fmt.Errorf("watch %s: ended", BucketEdges)
			}
			if e == nil {
				if !synced {
					synced = true
					stall.Stop()
					stalled = nil
					f.publish(members)
					f.ready.Store(true)
					f.setFresh()
				}
				continue
			}
			if f.apply(members, e) && synced {
				f.publish(members)
			}
		case <-stalled:
			return false, fmt.Errorf("load stalled: no update for %v", f.cfg.OpTimeout)
		case now := <-tick.C:
			if !nc.IsConnected() {
				return synced, errFleetDisconn
			}
			if err := f.put(ctx, kv); err != nil {
				return synced, err
			}
			if f.expire(members, now) && synced {
				f.publish(members)
			}
		}
	}
}

// bucket opens the bucket; it never creates it (tenancy-svc provisions
// it: internal/provision): a missing bucket is an error wrapping
// bus.ErrNotProvisioned, retried like any other.
func (f *Fleet) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.OpTimeout)
	defer cancel()
	return bus.Bucket(ctx, f.js, BucketEdges)
}

func (f *Fleet) put(ctx context.Context, kv jetstream.KeyValue) error {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.OpTimeout)
	defer cancel()
	if _, err := kv.Put(ctx, f.cfg.ID, f.self); err != nil {
		return fmt.Errorf("heartbeat %s: %w", BucketEdges, err)
	}
	return nil
}

// apply records one entry; it reports whether the membership changed.
func (f *Fleet) apply(members map[string]member, e jetstream.KeyValueEntry) bool {
	id := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		_, had := members[id]
		delete(members, id)
		return had
	}
	hb := f.cfg.Heartbeat
	var a Announcement
	if json.Unmarshal(e.Value(), &a) == nil && a.HeartbeatMs > 0 {
		hb = time.Duration(a.HeartbeatMs) * time.Millisecond
	}
	_, had := members[id]
	// Receipt time, not the entry's: clocks differ, and an entry read at
	// start may be older than it looks, which only counts a gone edge a
	// little longer (a smaller share, never a larger one).
	members[id] = member{seen: time.Now(), ttl: hb * proto.HeartbeatMisses}
	return !had
}

// expire drops the members silent for their ttl; it reports whether any
// went.
func (f *Fleet) expire(members map[string]member, now time.Time) bool {
	changed := false
	for id, m := range members {
		if id != f.cfg.ID && now.Sub(m.seen) > m.ttl {
			delete(members, id)
			f.log.Warn("fleet member silent, dropped", "member", id)
			changed = true
		}
	}
	return changed
}

// publish stores a new View if the membership differs from the current
// one.
func (f *Fleet) publish(members map[string]member) {
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	next := NewView(f.cfg.ID, ids)
	cur := f.view.Load()
	if slices.Equal(cur.Members, next.Members) {
		return
	}
	f.view.Store(next)
	f.log.Info("fleet membership changed", "edges", next.N(), "rank", next.Rank)
}

// stopWatch stops kw in the background and drains its channel, whose
// delivery goroutine blocks while it is full. Without a connection it
// leaves the stop to the end of the watch's context (the session's,
// cancelled as it returns), which nats.go handles on its own goroutine:
// Stop would wait out a JetStream API timeout to delete a consumer that
// an unreachable server cannot delete, holding Run's return.
func (f *Fleet) stopWatch(kw jetstream.KeyWatcher) {
	connected := f.js.Conn().IsConnected()
	f.stops.Go(func() {
		if connected {
			_ = kw.Stop()
		}
		t := time.NewTimer(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case _, ok := <-kw.Updates():
				if !ok {
					return
				}
			case <-t.C:
				return
			}
		}
	})
}

// setStale records a failure, logging the first after a read and any
// that differs, but not the end of Run.
func (f *Fleet) setStale(err error) {
	first, changed := f.st.Fail(err)
	switch {
	case err == errFleetStopped:
	case first:
		f.log.Warn("fleet membership stale, keeping the last shares", proto.LogErr, err)
	case changed:
		f.log.Info("fleet membership not in sync", proto.LogErr, err)
	}
}

func (f *Fleet) setFresh() {
	staleFor := f.st.Clear()
	v := f.view.Load()
	f.log.Info("fleet membership in sync", "edges", v.N(), "rank", v.Rank,
		"stale_for", staleFor.Round(time.Millisecond))
}

var _ Membership = (*Fleet)(nil)
