package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// TestAuditPublisherRedactsBeforePublishing proves the bytes that leave
// the Publisher hold no secret: the core subscription sees every publish
// as sent, the stream what it stored.
func TestAuditPublisherRedactsBeforePublishing(t *testing.T) {
	cfg := Config{
		Redact: []string{"arguments.password"},
		Tenants: map[string]TenantPolicy{
			"acme": {RecordArguments: true, RecordResults: true, Redact: []string{"result.content[*].text"}},
		},
	}
	h := startHarness(t, cfg)
	var mu sync.Mutex
	var wire [][]byte
	sub, err := h.nc.Subscribe(SubjectAll, func(m *nats.Msg) {
		mu.Lock()
		wire = append(wire, m.Data)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	secrets := []string{"hunter2", testAPIKey, testJWT, "SECRETSECRET", "dXNlcjpwYXNz", "tok123", "very-private-text"}
	args := `{"password":"hunter2","query":"use ` + testAPIKey + ` please","headers":{"Authorization":"Bearer ` + testJWT + `"},` +
		`"note":"Basic dXNlcjpwYXNz","nested":{"x":["` + testJWT + `"]}}`
	result := `{"content":[{"type":"text","text":"very-private-text"}],"structuredContent":{"echo":"` + testAPIKey + `"}}`
	base := Event{
		Time: time.Now(), Method: "tools/call", Upstream: "files", Outcome: OutcomeOK,
		Name:      "read?token=tok123",
		Principal: "svc " + testAPIKey,
	}
	acme, globex := base, base
	acme.Tenant, globex.Tenant = "acme", "globex"
	acme.Arguments, acme.Result = []byte(args), []byte(result)
	globex.Arguments, globex.Result = []byte(args), []byte(result)
	if a, r := h.pub.Wants("acme"); !a || !r {
		t.Fatalf("Wants(acme) = %v, %v", a, r)
	}
	if a, r := h.pub.Wants("globex"); a || r {
		t.Fatalf("Wants(globex) = %v, %v", a, r)
	}
	h.pub.Record(&acme)
	h.pub.Record(&globex)
	h.waitPublished(t, 2)
	waitFor(t, 5*time.Second, "2 messages on the wire", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(wire) == 2
	})

	page, err := h.s.Search(t.Context(), Query{})
	if err != nil || len(page.Events) != 2 {
		t.Fatalf("search: %+v, %v", page, err)
	}
	stored := make([][]byte, 0, 2)
	str, _ := h.s.js.Stream(t.Context(), DefaultStream)
	for _, hit := range page.Events {
		m, err := str.GetMsg(t.Context(), hit.Seq)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, m.Data)
	}
	mu.Lock()
	all := append(append([][]byte{}, wire...), stored...)
	mu.Unlock()
	for _, b := range all {
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("published event contains secret %q: %q", s, b)
			}
		}
	}

	got := map[string]Event{}
	for _, hit := range page.Events {
		got[hit.Tenant] = hit.Event
	}
	a := got["acme"]
	var av map[string]any
	if err := json.Unmarshal(a.Arguments, &av); err != nil {
		t.Fatalf("acme arguments %s: %v", a.Arguments, err)
	}
	if av["password"] != Redacted {
		t.Errorf("password = %v, want redacted", av["password"])
	}
	if q, _ := av["query"].(string); q != "use [REDACTED] please" {
		t.Errorf("query = %q: the API key should be scrubbed, the rest kept", q)
	}
	if !strings.Contains(string(a.Result), `"text":"[REDACTED]"`) || !strings.Contains(string(a.Result), `"type":"text"`) {
		t.Errorf("acme result %s: want content text redacted, the rest kept", a.Result)
	}
	if a.Name != "read?token=[REDACTED]" || a.Principal != "svc [REDACTED]" {
		t.Errorf("name %q principal %q: want scrubbed", a.Name, a.Principal)
	}
	if g := got["globex"]; g.Arguments != nil || g.Result != nil {
		t.Errorf("globex does not record arguments or results, got %s / %s", g.Arguments, g.Result)
	}
}

// TestAuditPublisherStreamUnavailable stops the server under a running
// Publisher: Record keeps returning (it would hang the test otherwise),
// and every event is accounted for as published or dropped.
func TestAuditPublisherStreamUnavailable(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv, nats.MaxReconnects(-1), nats.ReconnectBufSize(64<<10))
	provisionStream(t, nc, StreamConfig{})
	const buffer = 256
	pub, err := NewPublisher(nc, Config{Buffer: buffer, MaxPending: 64, AckTimeout: 200 * time.Millisecond, FlushTimeout: 200 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pub.Run(t.Context()) }()
	js, _ := jetstream.New(nc)
	waitFor(t, 10*time.Second, "stream", func() bool { _, err := js.Stream(t.Context(), DefaultStream); return err == nil })

	ev := genEvent(1, time.Now())
	for range 100 {
		pub.Record(&ev)
	}
	waitFor(t, 10*time.Second, "100 published", func() bool { return pub.Published() == 100 })

	srv.Shutdown()
	srv.WaitForShutdown()
	const calls = 20 * buffer
	for range calls {
		pub.Record(&ev)
	}
	if st := pub.Stats(); st.DroppedFull == 0 {
		t.Errorf("%d events recorded into a buffer of %d with the server down, none dropped: %+v", calls, buffer, st)
	}
	pub.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	pub.Record(&ev) // after Close: dropped, counted
	total := uint64(100 + calls + 1)
	waitFor(t, 10*time.Second, "every event accounted for", func() bool {
		st := pub.Stats()
		return st.Published+st.Dropped() == total && st.Pending == 0
	})
	st := pub.Stats()
	if st.Published != 100 || st.DroppedClosed == 0 {
		t.Errorf("stats %+v: want 100 published, the rest dropped, one of them after Close", st)
	}
}

// TestAuditPublisherStreamReturns deletes the stream under a running
// Publisher: it does not create it again (only tenancy-svc provisions
// streams), the events meanwhile are dropped and counted, and once the
// owner has created it again later events are stored.
func TestAuditPublisherStreamReturns(t *testing.T) {
	h := startHarness(t, Config{AckTimeout: time.Second})
	js, _ := jetstream.New(h.nc)
	if err := js.DeleteStream(t.Context(), DefaultStream); err != nil {
		t.Fatal(err)
	}
	ev := genEvent(1, time.Now())
	waitFor(t, 30*time.Second, "a publish failed while the stream was missing", func() bool {
		h.pub.Record(&ev)
		return h.pub.Stats().DroppedPublish > 0
	})
	if _, err := js.Stream(t.Context(), DefaultStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the Publisher created the stream again (%v): only its owner may", err)
	}
	provisionStream(t, h.nc, StreamConfig{})
	waitFor(t, 30*time.Second, "an event stored after the stream came back", func() bool {
		h.pub.Record(&ev)
		s, err := js.Stream(t.Context(), DefaultStream)
		if err != nil {
			return false
		}
		info, err := s.Info(t.Context())
		return err == nil && info.State.Msgs > 0
	})
}

func TestAuditPublisherNil(t *testing.T) {
	var p *Publisher
	ev := genEvent(0, time.Now())
	p.Record(&ev)
	p.Close()
	if a, r := p.Wants("acme"); a || r || p.Stats() != (Stats{}) {
		t.Fatal("nil Publisher is not a no-op")
	}
}

func TestAuditPublisherConfig(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	if _, err := NewPublisher(nc, Config{Redact: []string{"bad"}}, nil); err == nil {
		t.Error("bad global path accepted")
	}
	if _, err := NewPublisher(nc, Config{Tenants: map[string]TenantPolicy{"a": {Redact: []string{"arguments.x["}}}}, nil); err == nil {
		t.Error("bad tenant path accepted")
	}
	// Limits reach the stream, and a second ensure updates them.
	js, _ := jetstream.New(nc)
	sc := StreamConfig{MaxAge: time.Hour, MaxBytes: 1 << 20, MaxMsgs: 1000}
	if _, err := EnsureStream(t.Context(), js, sc); err != nil {
		t.Fatal(err)
	}
	sc.MaxMsgs = 2000
	s, err := EnsureStream(t.Context(), js, sc)
	if err != nil {
		t.Fatal(err)
	}
	c := s.CachedInfo().Config
	if c.MaxAge != time.Hour || c.MaxBytes != 1<<20 || c.MaxMsgs != 2000 || c.Storage != jetstream.FileStorage || !c.AllowDirect {
		t.Errorf("stream config %+v", c)
	}
	if d := (StreamConfig{}).JetStreamConfig(); d.MaxAge != DefaultMaxAge || d.MaxBytes != DefaultMaxBytes || d.MaxMsgs != -1 {
		t.Errorf("defaults %+v", d)
	}
	// Persist mode: JetStream's default unless AsyncWrites on one
	// replica (JetStream refuses async on a replicated stream).
	for _, tc := range []struct {
		sc   StreamConfig
		want jetstream.PersistModeType
	}{
		{StreamConfig{}, jetstream.DefaultPersistMode},
		{StreamConfig{AsyncWrites: true}, jetstream.AsyncPersistMode},
		{StreamConfig{AsyncWrites: true, Replicas: 3}, jetstream.DefaultPersistMode},
	} {
		if got := tc.sc.JetStreamConfig().PersistMode; got != tc.want {
			t.Errorf("%+v: persist mode %v, want %v", tc.sc, got, tc.want)
		}
	}
	if c.PersistMode != jetstream.DefaultPersistMode {
		t.Errorf("created with persist mode %v", c.PersistMode)
	}
	// The mode is fixed at creation: a stream created with AsyncWrites
	// keeps it when ensured without (JetStream would refuse the update),
	// limits still apply, and more replicas are refused with a reason.
	if err := js.DeleteStream(t.Context(), sc.name()); err != nil {
		t.Fatal(err)
	}
	sc.AsyncWrites = true
	// The server may still be removing the deleted stream's files: creating
	// it again right away can fail with "error creating store for stream"
	// (seen once in CI), so the creation is retried for a while.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := EnsureStream(t.Context(), js, sc)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sc.AsyncWrites, sc.MaxMsgs = false, 3000
	if s, err = EnsureStream(t.Context(), js, sc); err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; c.PersistMode != jetstream.AsyncPersistMode || c.MaxMsgs != 3000 {
		t.Errorf("after ensure without async_writes: %+v", c)
	}
	sc.Replicas = 3
	if _, err := EnsureStream(t.Context(), js, sc); !errors.Is(err, ErrAsyncReplicas) {
		t.Errorf("replicas 3 on an async stream: %v, want ErrAsyncReplicas", err)
	}
}

// TestAuditPublisherResumesAfterRestart stops the server, records while it
// is down (drops counted), restarts it on the same port and store, and
// checks events recorded afterwards are stored.
func TestAuditPublisherResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	start := func(port int) *server.Server {
		s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("server not ready")
		}
		return s
	}
	port := natstest.RestartablePort(t)
	srv := start(port)
	t.Cleanup(func() { srv.Shutdown() })
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	provisionStream(t, nc, StreamConfig{})
	pub, err := NewPublisher(nc, Config{AckTimeout: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pub.Run(t.Context()) }()
	t.Cleanup(func() { <-done })
	ev := genEvent(2, time.Now())
	waitFor(t, 10*time.Second, "first event published", func() bool {
		if pub.Published() == 0 {
			pub.Record(&ev)
		}
		return pub.Published() > 0
	})

	srv.Shutdown()
	srv.WaitForShutdown()
	for range 50 {
		pub.Record(&ev)
	}
	waitFor(t, 10*time.Second, "events recorded during the outage dropped", func() bool { return pub.Dropped() > 0 })

	srv = start(port)
	before := pub.Published()
	waitFor(t, 30*time.Second, "an event published after the restart", func() bool {
		pub.Record(&ev)
		return pub.Published() > before
	})
	js, _ := jetstream.New(nc)
	s, err := js.Stream(t.Context(), DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n < 2 {
		t.Fatalf("stream holds %d events after the restart, want the one before and those after", n)
	}
}

// TestAuditRecordBoundsBufferBytes: with the stream out of reach (Run not
// started), the buffered events of a tenant recording large results hold
// at most BufferBytes of them, and an Arguments bigger than MaxEventBytes
// is not held at all; the events themselves are all queued, and publish
// with markers in place of what was trimmed once Run starts.
func TestAuditRecordBoundsBufferBytes(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	provisionStream(t, nc, StreamConfig{})
	const budget = 1 << 20
	pub, err := NewPublisher(nc, Config{
		Buffer:      128,
		BufferBytes: budget,
		Tenants:     map[string]TenantPolicy{"acme": {RecordArguments: true, RecordResults: true}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const (
		fitting, fitSize = 48, 200 << 10 // 9.4 MiB in all, each publishable
		huge, hugeSize   = 16, 2 << 20   // 32 MiB, none publishable
	)
	result := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("r", fitSize) + `"}]}`)
	args := []byte(`{"blob":"` + strings.Repeat("a", hugeSize) + `"}`)
	record := func(ev Event) {
		// The caller's buffers are fresh per request and dropped after
		// it: only what the Publisher keeps stays live.
		ev.Arguments = bytes.Clone(ev.Arguments)
		ev.Result = bytes.Clone(ev.Result)
		pub.Record(&ev)
	}
	base := Event{Tenant: "acme", Method: "tools/call", Upstream: "files", Name: "big", Outcome: OutcomeOK}

	before := liveHeap()
	for range fitting {
		ev := base
		ev.Arguments, ev.Result = []byte(`{"q":1}`), result
		record(ev)
	}
	for range huge {
		ev := base
		ev.Arguments = args
		record(ev)
	}
	globex := base
	globex.Tenant, globex.Result = "globex", result // records neither: not charged
	record(globex)
	grown := liveHeap() - before

	st := pub.Stats()
	if st.Buffered != fitting+huge+1 || st.Dropped() != 0 {
		t.Fatalf("stats %+v: want every event queued", st)
	}
	if limit := int64(budget + 1<<20); grown > limit {
		t.Errorf("%d buffered events hold %d KiB, want at most the %d KiB budget and 1 MiB of slack", st.Buffered, grown>>10, budget>>10)
	}
	if st.BufferedBytes > budget+int64(st.Buffered*2*len(droppedFullJSON)) {
		t.Errorf("BufferedBytes %d past the budget %d", st.BufferedBytes, budget)
	}
	if st.TrimmedTooLarge != huge || st.TrimmedFull < fitting-budget/fitSize {
		t.Errorf("stats %+v: want %d trimmed too large, at least %d trimmed for the budget", st, huge, fitting-budget/fitSize)
	}

	done := make(chan error, 1)
	go func() { done <- pub.Run(t.Context()) }()
	defer func() { pub.Close(); <-done }()
	want := uint64(st.Buffered)
	waitFor(t, 30*time.Second, "buffered events published", func() bool { return pub.Published() == want })
	if st := pub.Stats(); st.BufferedBytes != 0 || st.Dropped() != 0 {
		t.Errorf("stats %+v after publishing: want no bytes held, nothing dropped", st)
	}
	s, err := NewSearcher(nc, "")
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.Search(t.Context(), Query{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, h := range page.Events {
		switch {
		case h.Tenant == "globex":
			if h.Arguments != nil || h.Result != nil {
				t.Errorf("globex event kept %s / %s", h.Arguments, h.Result)
			}
			kinds["globex"]++
		case bytes.Equal(h.Arguments, droppedTooLargeJSON) && h.Result == nil:
			kinds["too large"]++
		case bytes.Equal(h.Arguments, droppedFullJSON) && bytes.Equal(h.Result, droppedFullJSON):
			kinds["buffer full"]++
		case len(h.Result) > fitSize:
			kinds["kept"]++
		default:
			t.Errorf("unexpected event: arguments %.40s, result %.40s", h.Arguments, h.Result)
		}
	}
	if kinds["too large"] != huge || kinds["globex"] != 1 || kinds["kept"]+kinds["buffer full"] != fitting ||
		uint64(kinds["buffer full"]) != st.TrimmedFull {
		t.Errorf("published %v, stats %+v", kinds, st)
	}
}

// liveHeap is the live heap after a collection, in bytes.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestAuditRecordRacesFlush: a Record that passed its closed check just
// before Close, and enqueues only after Run's flush is over, is counted
// as dropped rather than left in the buffer unaccounted for.
func TestAuditRecordRacesFlush(t *testing.T) {
	h := startHarness(t, Config{})
	h.pub.afterClosedCheck = func() {
		h.pub.afterClosedCheck = nil
		h.pub.Close() // returns once Run has flushed and returned
	}
	ev := genEvent(1, time.Now())
	h.pub.Record(&ev)
	if st := h.pub.Stats(); st.Recorded != 1 || st.DroppedClosed != 1 || st.Buffered != 0 {
		t.Errorf("stats %+v: want the event recorded, then dropped as closed, none left buffered", st)
	}
	h.pub.Record(&ev)
	if st := h.pub.Stats(); st.DroppedClosed != 2 {
		t.Errorf("stats %+v: a Record after Close is dropped as closed", st)
	}
}
