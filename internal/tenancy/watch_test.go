package tenancy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

const (
	// visible is the bound: a change takes effect within 1 s.
	visible = time.Second
	// slow bounds what waits on NATS itself (startup, reconnection).
	slow = 15 * time.Second
	// grace is how long Run may take to return after its context ends.
	grace = 5 * time.Second
)

// fastConfig retries and probes quickly, so outage tests run fast.
var fastConfig = WatcherConfig{RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, ProbeInterval: 200 * time.Millisecond, OpTimeout: time.Second}

// waitFor polls cond until it holds or within passes, and fails with what
// was measured.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %v (waited %v)", what, within, time.Since(start))
		}
	}
	return time.Since(start)
}

// buckets creates both tenancy buckets as tenancy-svc would.
func buckets(t *testing.T, js jetstream.JetStream) (tenants, keys jetstream.KeyValue) {
	t.Helper()
	var err error
	if tenants, err = js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: BucketTenants, History: 5}); err != nil {
		t.Fatal(err)
	}
	if keys, err = js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: BucketAPIKeys, History: 5}); err != nil {
		t.Fatal(err)
	}
	markSeeded(t, js)
	return tenants, keys
}

// markSeeded writes tenancy-svc's KeySeeded mark.
func markSeeded(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	kv, err := js.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: BucketSeeded})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), KeySeeded, []byte("1")); err != nil {
		t.Fatal(err)
	}
}

func putTenant(t *testing.T, kv jetstream.KeyValue, ten Tenant) {
	t.Helper()
	b, err := proto.Marshal(&ten)
	if err != nil {
		t.Fatal(err)
	}
	putRaw(t, kv, ten.Name, b)
}

func putKey(t *testing.T, kv jetstream.KeyValue, rec apikey.Record) {
	t.Helper()
	b, err := proto.Marshal(&rec)
	if err != nil {
		t.Fatal(err)
	}
	putRaw(t, kv, rec.ID, b)
}

func putRaw(t *testing.T, kv jetstream.KeyValue, key string, b []byte) {
	t.Helper()
	if _, err := kv.Put(t.Context(), key, b); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// run starts w.Run and, at cleanup, checks it returns nil within grace.
func run(t *testing.T, w *Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		case <-time.After(grace):
			t.Errorf("Run did not return within %v of cancel", grace)
		}
		if w.Ready() {
			t.Error("Ready after Run returned")
		}
	})
}

func newWatcher(t *testing.T, js jetstream.JetStream, cfg WatcherConfig) *Watcher {
	t.Helper()
	w, err := NewWatcher(js, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// startWatcher runs a watcher over js and waits until it is ready.
func startWatcher(t *testing.T, js jetstream.JetStream, cfg WatcherConfig) *Watcher {
	t.Helper()
	w := newWatcher(t, js, cfg)
	run(t, w)
	waitFor(t, slow, "watcher ready", w.Ready)
	return w
}

func newJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, natstest.Start(t)))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestTenancyWatchInitialLoad(t *testing.T) {
	js := newJS(t)
	tkv, kkv := buckets(t, js)
	key, rec := newKey(t, "acme", "alice")
	putTenant(t, tkv, claimTenant("old-name"))
	if err := tkv.Delete(t.Context(), "old-name"); err != nil {
		t.Fatal(err)
	}
	putTenant(t, tkv, claimTenant("acme"))
	putTenant(t, tkv, claimTenant("beta"))
	putKey(t, kkv, rec)

	var changes atomic.Int32
	cfg := fastConfig
	cfg.OnChange = func(*Snapshot) { changes.Add(1) }
	w := newWatcher(t, js, cfg)
	if w.Current() == nil || w.Ready() {
		t.Fatal("before Run: want an empty snapshot and not ready")
	}
	if stale, _, reason := w.Stale(); !stale || reason == "" {
		t.Errorf("before Run: Stale = %v, %q; want stale with a reason", stale, reason)
	}
	run(t, w)
	waitFor(t, slow, "ready", w.Ready)

	s := w.Current()
	if stale, _, reason := w.Stale(); stale {
		t.Errorf("loaded but stale: %q", reason)
	}
	if s.Len() != 2 || s.Revision() == 0 {
		t.Errorf("Len = %d, Revision = %d; want 2 tenants and a revision", s.Len(), s.Revision())
	}
	if _, _, ok := s.Tenant("old-name"); ok {
		t.Error("a deleted tenant was loaded")
	}
	if ten, prin, err := s.ResolveKey(key, time.Now()); err != nil || ten != "acme" || prin != "alice" {
		t.Errorf("ResolveKey = %q, %q, %v", ten, prin, err)
	}
	if got, err := s.ResolvePrincipal(orgPrincipal("beta")); err != nil || got != "beta" {
		t.Errorf("ResolvePrincipal = %q, %v", got, err)
	}
	if changes.Load() == 0 {
		t.Error("OnChange not called for the first load")
	}
	if err := w.Run(t.Context()); err == nil {
		t.Error("second Run: want an error")
	}
}

// TestTenancyWatchLiveChanges: puts, deletes, a new deny rule and a key
// revocation each show within 1 s.
func TestTenancyWatchLiveChanges(t *testing.T) {
	js := newJS(t)
	tkv, kkv := buckets(t, js)
	key, rec := newKey(t, "acme", "alice")
	putTenant(t, tkv, claimTenant("acme"))
	putKey(t, kkv, rec)
	start := time.Now()
	cfg := WatcherConfig{OpTimeout: 250 * time.Millisecond}
	w := startWatcher(t, js, cfg)

	steps := []struct {
		name   string
		change func()
		seen   func(*Snapshot) bool
	}{
		{
			name:   "tenant added",
			change: func() { putTenant(t, tkv, claimTenant("beta")) },
			seen: func(s *Snapshot) bool {
				got, err := s.ResolvePrincipal(orgPrincipal("beta"))
				return err == nil && got == "beta"
			},
		},
		{
			name: "deny rule added",
			change: func() {
				ten := claimTenant("acme")
				ten.Policy.Rules = append([]policy.Rule{{Effect: policy.Deny, Kind: policy.KindTools, Pattern: "github__*"}}, ten.Policy.Rules...)
				putTenant(t, tkv, ten)
			},
			seen: func(s *Snapshot) bool {
				_, p, ok := s.Tenant("acme")
				return ok && !p.Allowed(policy.KindTools, "github", "github__get_issue")
			},
		},
		{
			name: "key revoked",
			change: func() {
				r := rec
				r.Revoked = true
				putKey(t, kkv, r)
			},
			seen: func(s *Snapshot) bool {
				_, _, err := s.ResolveKey(key, time.Now())
				return err == apikey.ErrRevoked
			},
		},
		{
			name:   "key deleted",
			change: func() { _ = kkv.Delete(t.Context(), rec.ID) },
			seen: func(s *Snapshot) bool {
				_, _, err := s.ResolveKey(key, time.Now())
				return err == apikey.ErrUnknown
			},
		},
		{
			name:   "tenant deleted",
			change: func() { _ = tkv.Purge(t.Context(), "beta") },
			seen: func(s *Snapshot) bool {
				_, _, ok := s.Tenant("beta")
				return !ok
			},
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change()
			took := waitFor(t, visible, st.name+" visible", func() bool { return st.seen(w.Current()) })
			t.Logf("visible after %v", took)
		})
	}
	// The watchdog on the watch's setup does not end the watch.
	waitFor(t, slow, "OpTimeout passed twice", func() bool { return time.Since(start) > 2*cfg.OpTimeout })
	putTenant(t, tkv, claimTenant("late"))
	waitFor(t, visible, "change after OpTimeout visible", func() bool {
		_, _, ok := w.Current().Tenant("late")
		return ok
	})
	if stale, _, reason := w.Stale(); stale {
		t.Errorf("stale after OpTimeout: %s", reason)
	}
}

// TestTenancyWatchBadRecords: records that fail to decode or compile are
// left out and reported, and the rest are served; fixing one clears it.
func TestTenancyWatchBadRecords(t *testing.T) {
	js := newJS(t)
	tkv, kkv := buckets(t, js)
	key, rec := newKey(t, "acme", "alice")
	putTenant(t, tkv, claimTenant("acme"))
	putRaw(t, tkv, "garbage", []byte{0xc1, 0xff, 0x00})
	badPolicy := claimTenant("bad-policy")
	badPolicy.Policy.Rules = []policy.Rule{{Effect: "perhaps", Pattern: "*"}}
	putTenant(t, tkv, badPolicy)
	misnamed := claimTenant("other")
	b, _ := proto.Marshal(&misnamed)
	putRaw(t, tkv, "misnamed", b)
	putKey(t, kkv, rec)
	putRaw(t, kkv, "zzzzzzzzzzzzzzzz", []byte("not msgpack at all"))
	w := startWatcher(t, js, WatcherConfig{})

	s := w.Current()
	probs := s.Problems()
	for _, want := range []string{`tenant "garbage": decode`, `tenant "bad-policy": policy: policy: invalid spec`, `tenant "misnamed": record names "other"`, `api key "zzzzzzzzzzzzzzzz": decode`} {
		found := false
		for _, p := range probs {
			found = found || strings.Contains(p, want)
		}
		if !found {
			t.Errorf("no problem says %q in %q", want, probs)
		}
	}
	if len(probs) != 4 {
		t.Errorf("%d problems, want 4: %q", len(probs), probs)
	}
	if _, _, err := s.ResolveKey(key, time.Now()); err != nil {
		t.Errorf("valid key not served: %v", err)
	}
	for _, name := range []string{"garbage", "bad-policy", "misnamed", "other"} {
		if _, _, ok := s.Tenant(name); ok {
			t.Errorf("left-out tenant %s served", name)
		}
	}
	if _, err := s.ResolvePrincipal(orgPrincipal("bad-policy")); !errors.Is(err, tenant.ErrNoTenant) {
		t.Errorf("left-out tenant's principal: %v, want ErrNoTenant", err)
	}

	putTenant(t, tkv, claimTenant("bad-policy"))
	waitFor(t, visible, "fixed tenant served", func() bool {
		_, _, ok := w.Current().Tenant("bad-policy")
		return ok && len(w.Current().Problems()) == 3
	})
}

func TestTenancyWatchAnonymous(t *testing.T) {
	js := newJS(t)
	tkv, _ := buckets(t, js)
	pub := Tenant{Name: "public", Anonymous: true, Policy: policy.Spec{Upstreams: []string{"docs"}, Default: policy.Allow}}
	putTenant(t, tkv, pub)
	w := startWatcher(t, js, WatcherConfig{})
	if got, ok := w.Current().Anonymous(); !ok || got != "public" {
		t.Fatalf("Anonymous = %q, %v; want public", got, ok)
	}
	second := claimTenant("second")
	second.Anonymous = true
	putTenant(t, tkv, second)
	waitFor(t, visible, "two anonymous tenants fail closed", func() bool {
		_, ok := w.Current().Anonymous()
		return !ok && len(w.Current().Problems()) == 1
	})
	_ = tkv.Delete(t.Context(), "second")
	waitFor(t, visible, "anonymous tenant back", func() bool {
		got, ok := w.Current().Anonymous()
		return ok && got == "public"
	})
}

// TestTenancyWatchBucketsMissing: before tenancy-svc creates the buckets
// the watcher waits, not ready and stale, and creates nothing.
func TestTenancyWatchBucketsMissing(t *testing.T) {
	js := newJS(t)
	w := newWatcher(t, js, fastConfig)
	run(t, w)
	// Not seeded: the reason says so, and nothing is loaded.
	waitFor(t, slow, "stale reason names the seed mark", func() bool {
		_, _, reason := w.Stale()
		return strings.Contains(reason, KeySeeded)
	})
	markSeeded(t, js)
	waitFor(t, slow, "stale reason names the missing bucket", func() bool {
		_, _, reason := w.Stale()
		return strings.Contains(reason, BucketTenants)
	})
	if w.Ready() {
		t.Fatal("ready without buckets")
	}
	if _, err := js.KeyValue(t.Context(), BucketTenants); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("the watcher created a bucket (or the lookup failed): %v", err)
	}
	// Only one bucket: still not ready.
	tkv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: BucketTenants})
	if err != nil {
		t.Fatal(err)
	}
	putTenant(t, tkv, claimTenant("acme"))
	waitFor(t, slow, "stale reason names the other bucket", func() bool {
		_, _, reason := w.Stale()
		return strings.Contains(reason, BucketAPIKeys)
	})
	if w.Ready() {
		t.Fatal("ready with one bucket")
	}
	if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: BucketAPIKeys}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, slow, "ready once both buckets exist", w.Ready)
	if _, _, ok := w.Current().Tenant("acme"); !ok {
		t.Error("tenant not loaded")
	}
	if stale, _, reason := w.Stale(); stale {
		t.Errorf("still stale: %q", reason)
	}
}

// TestTenancyWatchBucketDeleted: a bucket gone while NATS stays up is
// an outage too: stale, the last snapshot served, and the state of the
// recreated bucket loaded once it is back.
func TestTenancyWatchBucketDeleted(t *testing.T) {
	js := newJS(t)
	tkv, kkv := buckets(t, js)
	key, rec := newKey(t, "acme", "alice")
	putTenant(t, tkv, claimTenant("acme"))
	putKey(t, kkv, rec)
	w := startWatcher(t, js, fastConfig)
	before := w.Current()

	if err := js.DeleteKeyValue(t.Context(), BucketAPIKeys); err != nil {
		t.Fatal(err)
	}
	waitFor(t, slow, "stale after the bucket is deleted", func() bool { s, _, _ := w.Stale(); return s })
	_, _, reason := w.Stale()
	t.Logf("stale: %s", reason)
	if w.Current() != before {
		t.Error("the last good snapshot is not served while stale")
	}
	if _, _, err := w.Current().ResolveKey(key, time.Now()); err != nil {
		t.Errorf("while stale: ResolveKey: %v", err)
	}

	kkv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: BucketAPIKeys})
	if err != nil {
		t.Fatal(err)
	}
	_, other := newKey(t, "acme", "bob")
	putKey(t, kkv, other)
	waitFor(t, slow, "recreated bucket loaded", func() bool {
		s := w.Current()
		_, _, err := s.ResolveKey(key, time.Now())
		return err == apikey.ErrUnknown && len(s.keys) == 1
	})
	if stale, _, reason := w.Stale(); stale {
		t.Errorf("still stale: %s", reason)
	}
}

// restartable is a NATS server on a fixed port and store that can be
// stopped and started again.
type restartable struct {
	t    *testing.T
	opts server.Options
	s    *server.Server
}

func newRestartable(t *testing.T) *restartable {
	r := &restartable{t: t, opts: server.Options{
		Host: "127.0.0.1", Port: natstest.RestartablePort(t), JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
	}}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start() {
	r.t.Helper()
	opts := r.opts
	s, err := server.NewServer(&opts)
	if err != nil {
		r.t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		s.Shutdown()
		r.t.Fatal("server not ready within 5s")
	}
	r.s = s
}

func (r *restartable) stop() {
	if r.s != nil {
		r.s.Shutdown()
		r.s.WaitForShutdown()
		r.s = nil
	}
}

func (r *restartable) url() string { return "nats://127.0.0.1:" + strconv.Itoa(r.opts.Port) }

// TestTenancyWatchOutage: with the server down the watcher turns stale
// and keeps serving the last snapshot; after a restart it watches again,
// clears stale and sees new changes.
func TestTenancyWatchOutage(t *testing.T) {
	srv := newRestartable(t)
	nc, err := nats.Connect(srv.url(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	tkv, kkv := buckets(t, js)
	key, rec := newKey(t, "acme", "alice")
	putTenant(t, tkv, claimTenant("acme"))
	putKey(t, kkv, rec)
	w := startWatcher(t, js, fastConfig)
	before := w.Current()

	srv.stop()
	waitFor(t, slow, "stale after server shutdown", func() bool { s, _, _ := w.Stale(); return s })
	stale, since, reason := w.Stale()
	t.Logf("stale since %v: %s", since, reason)
	if !stale || since.IsZero() || reason == "" {
		t.Errorf("Stale = %v, %v, %q", stale, since, reason)
	}
	if w.Current() != before || !w.Ready() {
		t.Error("the last good snapshot is not served while stale")
	}
	if ten, _, err := w.Current().ResolveKey(key, time.Now()); err != nil || ten != "acme" {
		t.Errorf("while stale: ResolveKey = %q, %v", ten, err)
	}
	// Still stale a few probe intervals later: nothing clears it but a
	// successful watch.
	waitFor(t, slow, "stale persists", func() bool {
		s, _, r := w.Stale()
		return s && time.Since(since) > 3*fastConfig.ProbeInterval && r != ""
	})

	srv.start()
	waitFor(t, slow, "stale cleared after restart", func() bool { s, _, _ := w.Stale(); return !s })
	if w.Current().Revision() <= before.Revision() {
		t.Error("no new snapshot after the re-watch")
	}
	r := rec
	r.Revoked = true
	putKey(t, kkv, r)
	waitFor(t, visible, "revocation after restart visible", func() bool {
		_, _, err := w.Current().ResolveKey(key, time.Now())
		return err == apikey.ErrRevoked
	})
}

// TestTenancyWatchConcurrent: readers resolve continuously while bursts
// of changes are published (run with -race); the final state is exact,
// and bursts are batched into fewer snapshots than changes.
func TestTenancyWatchConcurrent(t *testing.T) {
	js := newJS(t)
	tkv, kkv := buckets(t, js)
	key, rec := newKey(t, "acme", "alice")
	putTenant(t, tkv, claimTenant("acme"))
	putKey(t, kkv, rec)
	w := startWatcher(t, js, WatcherConfig{Debounce: 20 * time.Millisecond})
	first := w.Current().Revision()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := orgPrincipal("acme")
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := w.Current()
				if ten, _, err := s.ResolveKey(key, time.Now()); err != nil || ten != "acme" {
					t.Errorf("ResolveKey during changes = %q, %v", ten, err)
					return
				}
				if got, err := s.ResolvePrincipal(p); err != nil || got != "acme" {
					t.Errorf("ResolvePrincipal during changes = %q, %v", got, err)
					return
				}
				_, _, _ = s.Tenant("t-7")
				_ = s.Problems()
				reads.Add(1)
			}
		}()
	}
	const n = 200
	for i := range n {
		putTenant(t, tkv, claimTenant(fmt.Sprintf("t-%d", i)))
		if i%10 == 0 {
			_, extra := newKey(t, fmt.Sprintf("t-%d", i), "svc")
			putKey(t, kkv, extra)
		}
	}
	took := waitFor(t, visible, "all tenants visible after the burst", func() bool { return w.Current().Len() == n+1 })
	close(stop)
	wg.Wait()
	revs := w.Current().Revision() - first
	t.Logf("%d changes in %d snapshots, last visible %v after the burst, %d reads", n+n/10, revs, took, reads.Load())
	if revs >= n+n/10 {
		t.Errorf("%d snapshots for %d changes: bursts not batched", revs, n+n/10)
	}
	if len(w.Current().keys) != 1+n/10 {
		t.Errorf("%d keys, want %d", len(w.Current().keys), 1+n/10)
	}
}

func TestTenancyWatchConfig(t *testing.T) {
	js := newJS(t)
	if _, err := NewWatcher(js, WatcherConfig{Debounce: -1}, nil); err == nil {
		t.Error("negative Debounce accepted")
	}
	w, err := NewWatcher(js, WatcherConfig{RetryMin: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w.cfg.RetryMax < w.cfg.RetryMin {
		t.Errorf("RetryMax %v below RetryMin %v", w.cfg.RetryMax, w.cfg.RetryMin)
	}
}
