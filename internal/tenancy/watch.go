package tenancy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/stale"
	"github.com/switchyard-mcp/switchyard/proto"
)

// WatcherConfig tunes a [Watcher]. The zero value is the production
// setting.
type WatcherConfig struct {
	// Debounce is the least time between two rebuilds while changes come
	// in bursts; a change after a quiet period is applied at once. Zero
	// means 5ms.
	Debounce time.Duration
	// RetryMin and RetryMax bound the backoff between attempts to watch
	// again after a failure (bucket missing, KV unreachable). A
	// reconnection to NATS retries at once. Zero means 50ms and 1s.
	RetryMin, RetryMax time.Duration
	// ProbeInterval is how often, while watching, both buckets are asked
	// for their status (one JetStream API request each) to notice a KV
	// that stopped answering while the connection stayed up; a lost
	// connection is noticed at once without it. Zero means 5s; negative
	// disables probing.
	ProbeInterval time.Duration
	// OpTimeout bounds each JetStream request: opening a bucket, a probe.
	// Zero means 5s.
	OpTimeout time.Duration
	// OnChange, if set, is called with each snapshot right after it is
	// published, on the Run goroutine, one call at a time. It must return
	// quickly (hand the work to another goroutine): the watch waits for it.
	OnChange func(*Snapshot)
	// TenantsOnly watches [BucketTenants] alone: the snapshot resolves no
	// API key. For a role that needs the tenants' policy but must not
	// read the key records (the router: its NATS identity may not).
	TenantsOnly bool
}

// Watcher keeps a [Snapshot] of the tenancy buckets ([BucketTenants],
// [BucketAPIKeys]) current: [Watcher.Run] watches both and publishes a new
// Snapshot after every change, which [Watcher.Current] returns.
//
// # Freshness
//
// A lone change is published as soon as it arrives; during a burst,
// changes are batched so that at most one snapshot is built per
// [WatcherConfig.Debounce]. Either way a change is visible in well under
// a second.
//
// # Outages
//
// When the NATS connection is lost, a watch ends, a bucket is missing or
// a probe fails, the Watcher turns stale ([Watcher.Stale]) and keeps
// serving the last snapshot it published: it neither fails open nor
// drops the tenants it knew. It then watches both buckets again from
// scratch (with backoff, or at once on reconnection) and publishes the
// new state, and clears stale, only when both have been read up to their
// current values, so a half-loaded state is never served. Until the
// first load, [Watcher.Current] is an empty snapshot that resolves
// nothing and [Watcher.Ready] is false; missing buckets (tenancy-svc
// creates them) are waited for, not created, and so is tenancy-svc's
// [KeySeeded] mark, checked at the start of every watch, so that buckets
// not seeded yet (a fresh or lost store) are never served as empty.
//
// Current, Ready and Stale are safe for concurrent use; Run is called
// once.
type Watcher struct {
	js  jetstream.JetStream
	cfg WatcherConfig
	log *slog.Logger

	snap  atomic.Pointer[Snapshot]
	ready atomic.Bool
	ran   atomic.Bool

	st stale.State

	// stops tracks watchers being stopped in the background: stopping one
	// deletes its consumer, a JetStream request that waits out its timeout
	// while NATS is down, and must not delay noticing the outage or
	// watching again. Run waits for them before it returns.
	stops sync.WaitGroup

	// Owned by the Run goroutine: the records of the last synced watch,
	// kept so that a watch after an outage recompiles only what changed.
	tenants map[string]*tenantRec
	keys    map[string]*keyRec
}

// errors a watch ends with, as Stale reports them.
var (
	errNotStarted   = errors.New("not started")
	errLoading      = errors.New("loading")
	errStopped      = errors.New("stopped")
	errDisconnected = errors.New("nats connection lost")
)

// drainTimeout bounds how long a stopped KV watcher's channel is drained
// so that its delivery goroutine, blocked on a full channel, can exit.
const drainTimeout = 100 * time.Millisecond

// NewWatcher returns a Watcher reading through js. It starts nothing and
// does no I/O; it returns an error for a negative duration in cfg. A nil
// logger discards. It panics if js is nil.
func NewWatcher(js jetstream.JetStream, cfg WatcherConfig, log *slog.Logger) (*Watcher, error) {
	if js == nil {
		panic("tenancy: nil jetstream")
	}
	if cfg.Debounce < 0 || cfg.RetryMin < 0 || cfg.RetryMax < 0 || cfg.OpTimeout < 0 {
		return nil, errors.New("tenancy: watcher durations must not be negative")
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = 5 * time.Millisecond
	}
	if cfg.RetryMin == 0 {
		cfg.RetryMin = 50 * time.Millisecond
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = time.Second
	}
	cfg.RetryMax = max(cfg.RetryMax, cfg.RetryMin)
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = 5 * time.Second
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = 5 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		js:  js,
		cfg: cfg,
		log: log.With(proto.LogComponent, "tenancy-watch"),
	}
	w.st.Restart(errNotStarted)
	w.snap.Store(emptySnapshot())
	return w, nil
}

// Current returns the latest snapshot: never nil, empty before the first
// load, the last good one while stale. It does not allocate.
func (w *Watcher) Current() *Snapshot { return w.snap.Load() }

// Ready reports whether the current state of both buckets has been loaded
// once. It stays true while stale (the last snapshot keeps serving) and
// turns false when Run returns.
func (w *Watcher) Ready() bool { return w.ready.Load() }

// Stale reports whether [Watcher.Current] may lag the buckets: from
// NewWatcher until the first load, and from any failure (connection lost,
// watch ended, bucket missing or unreachable) until both buckets have
// been read again. since is when it turned stale; reason is the latest
// failure, for health reports.
func (w *Watcher) Stale() (stale bool, since time.Time, reason string) { return w.st.Get() }

// Run watches both buckets until ctx ends, retrying after every failure,
// and returns nil then; every goroutine it started has exited. It
// returns an error only if called twice.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.ran.CompareAndSwap(false, true) {
		return errors.New("tenancy: watcher Run called twice")
	}
	nc := w.js.Conn()
	status := nc.StatusChanged()
	defer nc.RemoveStatusListener(status)
	defer w.stops.Wait()
	defer func() {
		w.ready.Store(false)
		w.setStale(errStopped)
	}()
	w.st.Restart(errLoading)
	backoff := w.cfg.RetryMin
	for {
		synced, err := w.session(ctx, nc, status)
		if ctx.Err() != nil {
			return nil
		}
		w.setStale(err)
		if synced {
			backoff = w.cfg.RetryMin
		}
		if !w.wait(ctx, backoff, status) {
			return nil
		}
		backoff = min(2*backoff, w.cfg.RetryMax)
	}
}

// wait sleeps for d, or until NATS reconnects; false means ctx ended.
func (w *Watcher) wait(ctx context.Context, d time.Duration, status <-chan nats.Status) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case st, ok := <-status:
			if !ok {
				status = nil // the connection dropped its listeners: rely on the timer
			} else if st == nats.CONNECTED {
				return true
			}
		}
	}
}

// session watches both buckets once, from their current values on,
// publishing snapshots, until ctx ends (nil) or the watch fails. synced
// says whether it got as far as publishing the buckets' state.
func (w *Watcher) session(ctx context.Context, nc *nats.Conn, status <-chan nats.Status) (synced bool, err error) {
	// Events from before this attempt say nothing about it.
	for drained := false; !drained; {
		select {
		case _, ok := <-status:
			drained = !ok
		default:
			drained = true
		}
	}
	if !nc.IsConnected() {
		return false, errDisconnected
	}
	if err := w.checkSeeded(ctx); err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tkv, tw, err := w.open(ctx, cancel, BucketTenants)
	if err != nil {
		return false, err
	}
	defer w.stopWatch(tw)
	var (
		kkv      jetstream.KeyValue
		kUpdates <-chan jetstream.KeyValueEntry // nil (never ready) when TenantsOnly
	)
	if !w.cfg.TenantsOnly {
		var kw jetstream.KeyWatcher
		if kkv, kw, err = w.open(ctx, cancel, BucketAPIKeys); err != nil {
			return false, err
		}
		defer w.stopWatch(kw)
		kUpdates = kw.Updates()
	}

	var (
		prevT, prevK     = w.tenants, w.keys
		tenants          = make(map[string]*tenantRec, len(prevT))
		keys             = make(map[string]*keyRec, len(prevK))
		tLoaded, kLoaded bool
		tDirty, kDirty   bool
		lastBuild        time.Time
		rebuild          = time.NewTimer(time.Hour)
		armed            bool
		probe            <-chan time.Time
		tUpdates         = tw.Updates()
		probed           = []jetstream.KeyValue{tkv}
	)
	if w.cfg.TenantsOnly {
		kLoaded = true
	} else {
		probed = append(probed, kkv)
	}
	rebuild.Stop()
	defer rebuild.Stop()
	// stalled catches a load that stops short of the current values (an
	// end-of-history marker nats.go never sends): no update for
	// OpTimeout before both buckets are loaded fails the watch.
	stall := time.NewTimer(w.cfg.OpTimeout)
	defer stall.Stop()
	stalled := stall.C
	if w.cfg.ProbeInterval > 0 {
		tick := time.NewTicker(w.cfg.ProbeInterval)
		defer tick.Stop()
		probe = tick.C
	}
	publish := func() {
		prev := w.snap.Load()
		tp, kp := prev.tenantPart, prev.keyPart
		if tDirty || !synced {
			tp = buildTenants(tenants)
		}
		if kDirty || !synced {
			kp = buildKeys(keys)
		}
		next := assemble(prev.rev+1, tp, kp)
		w.snap.Store(next)
		tDirty, kDirty, lastBuild = false, false, time.Now()
		if !synced {
			synced = true
			stall.Stop()
			stalled = nil
			w.tenants, w.keys = tenants, keys
			prevT, prevK = nil, nil
			w.ready.Store(true)
			w.setFresh(next)
		}
		if w.cfg.OnChange != nil {
			w.cfg.OnChange(next)
		}
	}
	// changed publishes at once the first time both buckets are loaded,
	// then at most once per Debounce.
	changed := func() {
		if stalled != nil {
			stall.Reset(w.cfg.OpTimeout)
		}
		switch {
		case !tLoaded || !kLoaded:
		case !synced:
			publish()
		case !armed && (tDirty || kDirty):
			armed = true
			rebuild.Reset(max(0, time.Until(lastBuild.Add(w.cfg.Debounce))))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return synced, nil
		case st, ok := <-status:
			if !ok {
				status = nil
			} else if st != nats.CONNECTED || !nc.IsConnected() {
				return synced, errDisconnected
			}
		case e, ok := <-tUpdates:
			if !ok {
				return synced, fmt.Errorf("watch %s: ended", BucketTenants)
			}
			if e == nil {
				tLoaded = true
			} else {
				w.applyTenant(tenants, prevT, e)
				tDirty = true
			}
			changed()
		case e, ok := <-kUpdates:
			if !ok {
				return synced, fmt.Errorf("watch %s: ended", BucketAPIKeys)
			}
			if e == nil {
				kLoaded = true
			} else {
				w.applyKey(keys, prevK, e)
				kDirty = true
			}
			changed()
		case <-rebuild.C:
			armed = false
			publish()
		case <-stalled:
			return false, fmt.Errorf("load stalled: no update for %v", w.cfg.OpTimeout)
		case <-probe:
			if !nc.IsConnected() {
				return synced, errDisconnected
			}
			if err := w.probe(ctx, probed...); err != nil {
				return synced, err
			}
		}
	}
}

// open opens bucket, without creating it, and watches all its keys for
// as long as ctx lasts: nats.go ends the watch with the context its
// consumer was created with. cancel cancels ctx; it is called if the
// watch is not set up within OpTimeout, since a request whose reply is
// lost (to a server restart) would otherwise wait as long as ctx.
func (w *Watcher) open(ctx context.Context, cancel context.CancelFunc, bucket string) (jetstream.KeyValue, jetstream.KeyWatcher, error) {
	octx, ocancel := context.WithTimeout(ctx, w.cfg.OpTimeout)
	defer ocancel()
	kv, err := w.js.KeyValue(octx, bucket)
	if err != nil {
		return nil, nil, fmt.Errorf("open bucket %s: %w", bucket, err)
	}
	watchdog := time.AfterFunc(w.cfg.OpTimeout, cancel)
	kw, err := kv.WatchAll(ctx)
	if !watchdog.Stop() {
		err = errors.Join(err, context.DeadlineExceeded)
	}
	if err != nil {
		if kw != nil {
			w.stopWatch(kw)
		}
		return nil, nil, fmt.Errorf("watch bucket %s: %w", bucket, err)
	}
	return kv, kw, nil
}

// errNotSeeded: tenancy-svc has not seeded this store yet.
var errNotSeeded = errors.New("tenancy-svc has not seeded the tenancy buckets yet (" + BucketSeeded + " has no key " + KeySeeded + ")")

// checkSeeded returns errNotSeeded until tenancy-svc has written
// KeySeeded (a lookup error is returned as is).
func (w *Watcher) checkSeeded(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.OpTimeout)
	defer cancel()
	kv, err := w.js.KeyValue(ctx, BucketSeeded)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return errNotSeeded
	}
	if err != nil {
		return fmt.Errorf("open bucket %s: %w", BucketSeeded, err)
	}
	if _, err := kv.Get(ctx, KeySeeded); errors.Is(err, jetstream.ErrKeyNotFound) {
		return errNotSeeded
	} else if err != nil {
		return fmt.Errorf("read %s/%s: %w", BucketSeeded, KeySeeded, err)
	}
	return nil
}

// probe asks both buckets for their status.
func (w *Watcher) probe(ctx context.Context, kvs ...jetstream.KeyValue) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.OpTimeout)
	defer cancel()
	for _, kv := range kvs {
		if _, err := kv.Status(ctx); err != nil {
			return fmt.Errorf("probe bucket %s: %w", kv.Bucket(), err)
		}
	}
	return nil
}

// stopWatch stops kw in the background and drains its channel: its
// delivery goroutine blocks while the channel is full and must get to see
// the unsubscribe.
func (w *Watcher) stopWatch(kw jetstream.KeyWatcher) {
	w.stops.Go(func() {
		_ = kw.Stop()
		drain(kw.Updates())
	})
}

func drain(updates <-chan jetstream.KeyValueEntry) {
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	for {
		select {
		case _, ok := <-updates:
			if !ok {
				return
			}
		case <-t.C:
			return
		}
	}
}

func (w *Watcher) applyTenant(recs, prev map[string]*tenantRec, e jetstream.KeyValueEntry) {
	key := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		delete(recs, key)
		return
	}
	if p := reuse(recs, prev, key, e.Value()); p != nil {
		recs[key] = p
		return
	}
	r := decodeTenant(key, e.Value())
	if r.problem != "" {
		w.log.Warn("tenant record left out", proto.LogTenant, key, proto.LogErr, r.problem)
	}
	recs[key] = r
}

func (w *Watcher) applyKey(recs, prev map[string]*keyRec, e jetstream.KeyValueEntry) {
	key := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		delete(recs, key)
		return
	}
	if p := reuse(recs, prev, key, e.Value()); p != nil {
		recs[key] = p
		return
	}
	r := decodeKey(key, e.Value())
	if r.problem != "" {
		w.log.Warn("api key record left out", proto.LogErr, r.problem)
	}
	recs[key] = r
}

// reuse returns the record already decoded from value under key, in the
// current watch or the last synced one, or nil.
func reuse[R interface{ rawValue() []byte }](recs, prev map[string]R, key string, value []byte) R {
	for _, m := range [2]map[string]R{recs, prev} {
		if r, ok := m[key]; ok && bytes.Equal(r.rawValue(), value) {
			return r
		}
	}
	var zero R
	return zero
}

func (r *tenantRec) rawValue() []byte { return r.raw }
func (r *keyRec) rawValue() []byte    { return r.raw }

// setStale records a failure; the first one after a sync is logged, and
// later ones if they differ, but not the end of Run.
func (w *Watcher) setStale(err error) {
	first, changed := w.st.Fail(err)
	switch {
	case err == errStopped:
	case first:
		w.log.Warn("tenancy snapshot stale, serving the last one", proto.LogErr, err)
	case changed:
		w.log.Info("tenancy watch not in sync", proto.LogErr, err)
	}
}

// setFresh clears stale once a watch has published the buckets' state.
func (w *Watcher) setFresh(s *Snapshot) {
	staleFor := w.st.Clear()
	w.log.Info("tenancy snapshot in sync", "tenants", s.Len(), "api_keys", len(s.keys),
		"problems", len(s.problems), "stale_for", staleFor.Round(time.Millisecond))
}
