package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// Benchmarks (docs/audit.md records their numbers):
//
//	go test -run '^$' -bench 'BenchmarkAudit' -benchtime 200000x ./audit
//	SWITCHYARD_AUDIT_BENCH_EVENTS=1000000 go test -run '^$' -bench 'BenchmarkAuditSearch' -benchtime 200x -timeout 30m ./audit
//
// SWITCHYARD_AUDIT_BENCH_EVENTS sets the stored events the search
// benchmark runs on (default 20000); SWITCHYARD_AUDIT_BENCH_DIR keeps the
// store between runs (the events are written only if the stream holds
// fewer).

// benchEvent is the i-th event of the benchmark population: 20 tenants
// (round robin), and independently drawn (a hash of i) one of 8
// upstreams with 10 tools each, one of 50 principals and an outcome of
// testOutcomes; about 180 bytes encoded.
func benchEvent(i int, now time.Time) Event {
	x := uint64(i)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	up := int(x % 8)
	ev := Event{
		Time:          now,
		Tenant:        "tenant-" + strconv.Itoa(i%20),
		Principal:     "user-" + strconv.Itoa(int(x>>8%50)) + "@example.com",
		Method:        "tools/call",
		Upstream:      "upstream-" + strconv.Itoa(up),
		Name:          "tool_" + strconv.Itoa(up) + "_" + strconv.Itoa(int(x>>16%10)),
		Outcome:       testOutcomes[int(x>>24%uint64(len(testOutcomes)))],
		Duration:      time.Duration(1000+i%5000) * time.Microsecond,
		RequestBytes:  int64(200 + i%300),
		ResponseBytes: int64(500 + i%2000),
		TraceID:       "4bf92f3577b34da6a3ce929d0e0e4736",
		EdgeID:        "edge-1",
		Session:       i%2 == 0,
	}
	if ev.Outcome != OutcomeOK && ev.Outcome != OutcomeToolError {
		ev.ErrorCode, _ = strconv.ParseInt(ev.Outcome, 10, 64)
	} else {
		ev.UpstreamDuration = ev.Duration * 8 / 10
	}
	return ev
}

func BenchmarkAuditEncode(b *testing.B) {
	ev := benchEvent(3, time.Now())
	b.Run("codec=msgpack", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = AppendEncode(buf[:0], &ev)
		}
		b.ReportMetric(float64(len(buf)), "bytes/event")
	})
	b.Run("codec=json", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			out, _ := json.Marshal(&ev)
			n = len(out)
		}
		b.ReportMetric(float64(n), "bytes/event")
	})
}

func BenchmarkAuditDecode(b *testing.B) {
	ev := benchEvent(3, time.Now())
	mp, _ := AppendEncode(nil, &ev)
	js, _ := json.Marshal(&ev)
	b.Run("codec=msgpack", func(b *testing.B) {
		b.ReportAllocs()
		var out Event
		for b.Loop() {
			if err := Decode(mp, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=json", func(b *testing.B) {
		b.ReportAllocs()
		var out Event
		for b.Loop() {
			if err := json.Unmarshal(js, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAuditPrepare is the Publisher's own work per event before the
// publish: policy, scrubbing, subject and encoding (no arguments).
func BenchmarkAuditPrepare(b *testing.B) {
	srv := natstest.Start(b)
	nc := natstest.Connect(b, srv)
	provisionStream(b, nc, StreamConfig{})
	p, err := NewPublisher(nc, Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]Event, 64)
	for i := range evs {
		evs[i] = benchEvent(i, time.Now())
	}
	b.ReportAllocs()
	var buf []byte
	i := 0
	for b.Loop() {
		ev := evs[i%len(evs)]
		i++
		p.prepare(&ev)
		_ = Subject(&ev)
		buf, _ = AppendEncode(buf[:0], &ev)
	}
}

// BenchmarkAuditIngest is the sustained rate events reach the stream
// (acknowledged, file storage) on an embedded server: the recorders wait
// for buffer room, so nothing is dropped and the rate is what the stream
// absorbs. allocs/op counts the whole process, the embedded server's
// allocations included.
func BenchmarkAuditIngest(b *testing.B) { benchIngest(b, nil) }

// BenchmarkAuditIngestSync is BenchmarkAuditIngest on a server flushing
// its store to disk on every write (switchyard nats --sync always), and
// every second: the cost of the sync policy on audit ingest
// (docs/reliability.md, docs/benchmarks.md).
func BenchmarkAuditIngestSync(b *testing.B) {
	for _, c := range []struct {
		name string
		edit func(*server.Options)
	}{
		{"default", nil},
		{"1s", func(o *server.Options) { o.SyncInterval = time.Second }},
		{"always", func(o *server.Options) { o.SyncAlways = true }},
	} {
		b.Run(c.name, func(b *testing.B) { benchIngest(b, c.edit) })
	}
}

func benchIngest(b *testing.B, edit func(*server.Options)) {
	srv := natstest.StartWith(b, edit)
	nc := natstest.Connect(b, srv)
	provisionStream(b, nc, StreamConfig{})
	p, err := NewPublisher(nc, Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	js, _ := jetstream.New(nc)
	waitFor(b, 10*time.Second, "stream", func() bool { _, err := js.Stream(b.Context(), DefaultStream); return err == nil })
	evs := make([]Event, 1024)
	for i := range evs {
		evs[i] = benchEvent(i, time.Now())
	}

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	base := p.Published()
	var wg sync.WaitGroup
	const recorders = 4 // edge request goroutines
	for r := range recorders {
		n := b.N / recorders
		if r == 0 {
			n += b.N % recorders
		}
		wg.Go(func() {
			for i := range n {
				p.enqueueWait(&evs[(i*recorders+r)%len(evs)])
			}
		})
	}
	wg.Wait()
	waitFor(b, 10*time.Minute, "events acknowledged", func() bool { return p.Published()-base >= uint64(b.N) })
	elapsed := time.Since(start)
	b.StopTimer()
	if d := p.Dropped(); d > 0 {
		b.Fatalf("%d events dropped", d)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// searchBench is the stored population for BenchmarkAuditSearch, built
// once per process.
var searchBench struct {
	once   sync.Once
	err    error
	srv    *server.Server
	nc     *nats.Conn
	s      *Searcher
	n      int
	ingest time.Duration
}

func benchEvents() int {
	if v, err := strconv.Atoi(os.Getenv("SWITCHYARD_AUDIT_BENCH_EVENTS")); err == nil && v > 0 {
		return v
	}
	return 20000
}

func setupSearchBench(b *testing.B) {
	sb := &searchBench
	sb.once.Do(func() {
		sb.n = benchEvents()
		dir := os.Getenv("SWITCHYARD_AUDIT_BENCH_DIR")
		if dir == "" {
			var err error
			if dir, err = os.MkdirTemp("", "audit-bench-"); err != nil {
				sb.err = err
				return
			}
			// Removed by TestMain.
			benchDirs = append(benchDirs, dir)
		}
		opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir,
			NoLog: true, NoSigs: true, MaxPayload: natstest.MaxPayload}
		srv, err := server.NewServer(opts)
		if err != nil {
			sb.err = err
			return
		}
		go srv.Start()
		if !srv.ReadyForConnections(10 * time.Second) {
			sb.err = fmt.Errorf("server not ready")
			return
		}
		sb.srv = srv
		nc, err := nats.Connect("", nats.InProcessServer(srv))
		if err != nil {
			sb.err = err
			return
		}
		sb.nc = nc
		js, _ := jetstream.New(nc)
		have := uint64(0)
		if st, err := js.Stream(context.Background(), DefaultStream); err == nil {
			have = st.CachedInfo().State.Msgs
		}
		if have < uint64(sb.n) {
			if have > 0 {
				_ = js.DeleteStream(context.Background(), DefaultStream)
			}
			sb.err = fillSearchBench(b, nc, sb.n)
		}
		sb.s, err = NewSearcher(nc, "")
		if sb.err == nil {
			sb.err = err
		}
	})
	if sb.err != nil {
		b.Fatal(sb.err)
	}
}

// benchDirs are the stores TestMain removes.
var benchDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	if searchBench.srv != nil {
		searchBench.nc.Close()
		searchBench.srv.Shutdown()
		searchBench.srv.WaitForShutdown()
	}
	for _, d := range benchDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

func fillSearchBench(b *testing.B, nc *nats.Conn, n int) error {
	provisionStream(b, nc, StreamConfig{MaxBytes: -1})
	p, err := NewPublisher(nc, Config{Stream: StreamConfig{MaxBytes: -1}}, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	for i := range n {
		ev := benchEvent(i, time.Now())
		p.enqueueWait(&ev)
	}
	deadline := time.Now().Add(30 * time.Minute)
	for p.Published() < uint64(n) {
		if p.Dropped() > 0 {
			return fmt.Errorf("%d events dropped while filling", p.Dropped())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("filling: %d of %d published", p.Published(), n)
		}
		time.Sleep(10 * time.Millisecond) // benchmark setup, polling with a deadline
	}
	searchBench.ingest = time.Since(start)
	b.Logf("stored %d events in %v (%.0f events/s)", n, searchBench.ingest, float64(n)/searchBench.ingest.Seconds())
	return nil
}

// BenchmarkAuditSearch measures one search's latency (the newest 50
// matching events) over the stored population; it reports p50 and p99.
// The queries rotate over tenants and tools so that no answer is cached.
// SWITCHYARD_AUDIT_BENCH_LIVE_RATE (events/s, default 1000; 0 for none)
// keeps ingesting events of the same population meanwhile, as a live
// gateway does:
// besides being the realistic case, it keeps the stream's last block in
// the server's cache (a static store reloads it for each newest-first
// read, about 6 ms).
func BenchmarkAuditSearch(b *testing.B) {
	setupSearchBench(b)
	sb := &searchBench
	rate := 1000
	if v, err := strconv.Atoi(os.Getenv("SWITCHYARD_AUDIT_BENCH_LIVE_RATE")); err == nil && v >= 0 {
		rate = v
	}
	if rate > 0 {
		p, err := NewPublisher(sb.nc, Config{Stream: StreamConfig{MaxBytes: -1}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		var wg sync.WaitGroup
		wg.Go(func() { _ = p.Run(ctx) })
		wg.Go(func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				for j := range rate / 100 {
					ev := benchEvent(sb.n+i*rate/100+j, time.Now())
					p.Record(&ev)
				}
			}
		})
		defer func() { cancel(); wg.Wait() }()
	}
	queries := map[string]func(i int) Query{
		"query=tenant+tool": func(i int) Query {
			return Query{Tenant: "tenant-" + strconv.Itoa(i%20), Tool: "tool_" + strconv.Itoa(i%8) + "_" + strconv.Itoa(i%10)}
		},
		"query=tenant": func(i int) Query { return Query{Tenant: "tenant-" + strconv.Itoa(i%20)} },
		"query=tenant+principal": func(i int) Query {
			return Query{Tenant: "tenant-" + strconv.Itoa(i%20), Principal: "user-" + strconv.Itoa(i%50) + "@example.com"}
		},
		"query=tenant+upstream+outcome": func(i int) Query {
			return Query{Tenant: "tenant-" + strconv.Itoa(i%20), Upstream: "upstream-" + strconv.Itoa(i%8), Outcome: "-32602"}
		},
		"query=all":        func(int) Query { return Query{} },
		"query=tool+page2": func(i int) Query { return Query{Tool: "tool_" + strconv.Itoa(i%8) + "_" + strconv.Itoa(i%10)} },
	}
	names := make([]string, 0, len(queries))
	for k := range queries {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		mk := queries[name]
		b.Run(fmt.Sprintf("events=%d/%s", sb.n, name), func(b *testing.B) {
			var lat []time.Duration
			found := 0
			i := 0
			for b.Loop() {
				q := mk(i)
				i++
				t := time.Now()
				p, err := sb.s.Search(b.Context(), q)
				if err == nil && name == "query=tool+page2" && p.Next != 0 {
					q.Cursor = p.Next
					p, err = sb.s.Search(b.Context(), q)
				}
				lat = append(lat, time.Since(t))
				if err != nil {
					b.Fatal(err)
				}
				found += len(p.Events)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(found)/float64(len(lat)), "events/search")
		})
	}
}
