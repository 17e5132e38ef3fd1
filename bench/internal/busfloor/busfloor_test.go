package busfloor

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/bench/internal/stats"
	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// checkRun checks what every run of n measured requests must hold: the
// counts, no errors, and one-way medians that are positive and no longer
// than the round trip's (each request's hop lies inside its round trip).
// No bound on the times themselves: a slow machine must not fail it.
func checkRun(t *testing.T, r *Result, mode string, n int) {
	t.Helper()
	if r.Mode != mode || r.N != n || r.Errors != 0 || r.WarmupErrors != 0 {
		t.Errorf("mode %q, n %d, errors %d (warmup %d); want %s, %d, none", r.Mode, r.N, r.Errors, r.WarmupErrors, mode, n)
	}
	if len(r.Samples) != n {
		t.Errorf("%d samples, want %d", len(r.Samples), n)
	}
	for name, s := range map[string]int{"rtt": r.RTT.N, "request hop": r.RequestHop.N, "responder": r.Responder.N, "reply hop": r.ReplyHop.N} {
		if s != n {
			t.Errorf("%s summarizes %d requests, want %d", name, s, n)
		}
	}
	if r.RTT.P50 <= 0 || r.RTT.Min > r.RTT.P50 || r.RTT.P50 > r.RTT.P99 || r.RTT.P99 > r.RTT.Max {
		t.Errorf("rtt summary out of order: %+v", r.RTT)
	}
	for name, p50 := range map[string]time.Duration{"request hop": r.RequestHop.P50, "reply hop": r.ReplyHop.P50} {
		if p50 <= 0 || p50 > r.RTT.P50 {
			t.Errorf("%s median %v, want positive and at most the round trip's %v", name, p50, r.RTT.P50)
		}
	}
	if r.Responder.P50 < 0 || r.Responder.P50 > r.RTT.P50 {
		t.Errorf("responder median %v, want 0 to the round trip's %v", r.Responder.P50, r.RTT.P50)
	}
}

// gcPercent returns the current GOGC percentage.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestBusfloorInproc runs the in-process mode end to end: embedded
// server, responder and requester in this process, GOMAXPROCS and GOGC
// set during the requests and restored after.
func TestBusfloorInproc(t *testing.T) {
	before, gcBefore := runtime.GOMAXPROCS(0), gcPercent()
	r, err := Run(t.Context(), Config{Mode: ModeInproc, N: 60, Warmup: 5, PayloadBytes: 400, Gap: 20 * time.Microsecond, GOMAXPROCS: 1, GOGC: gcBefore + 300, Stamps: true})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkRun(t, r, "bus-inproc", 60)
	if r.GOMAXPROCS != 1 {
		t.Errorf("result says GOMAXPROCS %d during the requests, want 1", r.GOMAXPROCS)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS is %d after Run, want it restored to %d", got, before)
	}
	if r.GOGC != strconv.Itoa(gcBefore+300) || !r.Stamps {
		t.Errorf("result says GOGC %q, stamps %v; want %d, true", r.GOGC, r.Stamps, gcBefore+300)
	}
	if got := gcPercent(); got != gcBefore {
		t.Errorf("GOGC is %d after Run, want it restored to %d", got, gcBefore)
	}
	if r.Subject != Subject || r.NATSURL != "" || r.PayloadBytes != 400 || r.Gap != 20*time.Microsecond || r.Timeout != DefaultTimeout {
		t.Errorf("subject %q, url %q, payload %d, gap %v, timeout %v", r.Subject, r.NATSURL, r.PayloadBytes, r.Gap, r.Timeout)
	}
	// A timer never fires early; that it fires late (about 1ms for this
	// 20µs gap in an idle process) is what Pause is there to say.
	if r.Pause.N != 60 || r.Pause.Min < r.Gap {
		t.Errorf("pause summary %+v, want the 60 measured pauses, each at least the %v gap", r.Pause, r.Gap)
	}
	if err := r.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestBusfloorTCP measures against a server over TCP with the responder
// on a connection of its own, as "bench bus -mode tcp" does with the
// processes it starts.
func TestBusfloorTCP(t *testing.T) {
	ns := natstest.Start(t)
	rc := connect(t, ns.ClientURL())
	if _, err := Respond(rc, "test.bus.echo"); err != nil {
		t.Fatal(err)
	}
	if err := rc.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := Run(t.Context(), Config{Mode: ModeTCP, NATSURL: ns.ClientURL(), Subject: "test.bus.echo", N: 40, PayloadBytes: 1000, Stamps: true})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkRun(t, r, "bus-tcp", 40)
	if r.NATSURL != ns.ClientURL() || r.Subject != "test.bus.echo" || r.Pause.N != 0 {
		t.Errorf("url %q, subject %q, %d pauses without a gap", r.NATSURL, r.Subject, r.Pause.N)
	}
}

// TestBusfloorNoStamps: without stamps the requests carry no headers (a
// second, plain subscriber on the subject sees every one) and only the
// round trip is measured.
func TestBusfloorNoStamps(t *testing.T) {
	ns := natstest.Start(t)
	rc := connect(t, ns.ClientURL())
	if _, err := Respond(rc, Subject); err != nil {
		t.Fatal(err)
	}
	seen := make(chan *nats.Msg, 100)
	if _, err := rc.ChanSubscribe(Subject, seen); err != nil {
		t.Fatal(err)
	}
	if err := rc.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := Run(t.Context(), Config{Mode: ModeTCP, NATSURL: ns.ClientURL(), N: 20, Warmup: 2})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Stamps || r.RTT.N != 20 || len(r.Samples) != 20 || r.Errors != 0 || r.RequestHop.N != 0 || r.Responder.N != 0 || r.ReplyHop.N != 0 {
		t.Errorf("stamps %v, rtt n %d, %d samples, %d errors, hop ns %d/%d/%d; want false, 20, 20, 0, none",
			r.Stamps, r.RTT.N, len(r.Samples), r.Errors, r.RequestHop.N, r.Responder.N, r.ReplyHop.N)
	}
	// The probe, the warmup and the measured requests.
	for i := range 1 + 2 + 20 {
		select {
		case m := <-seen:
			if len(m.Header) != 0 {
				t.Fatalf("request %d has headers %v", i, m.Header)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the plain subscriber saw %d requests, want 23", i)
		}
	}
}

// TestBusfloorNoResponder: without a responder the first request fails
// (NATS's no-responders status) and so does the run, at once.
func TestBusfloorNoResponder(t *testing.T) {
	ns := natstest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := Run(ctx, Config{Mode: ModeTCP, NATSURL: ns.ClientURL(), N: 10, Timeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "no answer on "+Subject) {
		t.Fatalf("Run = %v, want no answer on %s", err, Subject)
	}
	if ctx.Err() != nil {
		t.Error("Run waited for the request's timeout; no responders should fail it at once")
	}
}

// TestBusfloorInterrupted: a run whose ctx ends returns an error, not a
// result, also in the middle of a pause (an hour long here: the test ends
// only if the pause gives way).
func TestBusfloorInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	stop := time.AfterFunc(50*time.Millisecond, cancel)
	defer stop.Stop()
	_, err := Run(ctx, Config{Mode: ModeInproc, N: 2, Gap: time.Hour})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want it interrupted by the cancel", err)
	}
}

// TestBusfloorRespond checks the responder: in queue group Queue, it
// echoes the payload and, for a traced request only, returns the
// request's stamps with worker_in and worker_out after them.
func TestBusfloorRespond(t *testing.T) {
	ns := natstest.Start(t)
	rc := connect(t, ns.ClientURL())
	sub, err := Respond(rc, "test.respond")
	if err != nil {
		t.Fatal(err)
	}
	if sub.Queue != Queue || sub.Subject != "test.respond" {
		t.Errorf("subscription %q in queue %q, want test.respond in %q", sub.Subject, sub.Queue, Queue)
	}
	if err := rc.Flush(); err != nil {
		t.Fatal(err)
	}
	nc := connect(t, ns.ClientURL())

	hdr := nats.Header{hop.Header: []string{"1"}}
	hop.Set(hdr, hop.EdgePub)
	payload := Payload(300)
	rep, err := nc.RequestMsg(&nats.Msg{Subject: "test.respond", Data: payload, Header: hdr}, 5*time.Second)
	if err != nil {
		t.Fatalf("traced request: %v", err)
	}
	if !bytes.Equal(rep.Data, payload) {
		t.Errorf("reply %q, want the payload echoed", rep.Data)
	}
	st := hop.Stamps(rep.Header)
	if !hop.Traced(rep.Header) || st[hop.EdgePub] == 0 || st[hop.WorkerIn] < st[hop.EdgePub] || st[hop.WorkerOut] < st[hop.WorkerIn] {
		t.Errorf("reply headers %v, want the trace flag and edge_pub <= worker_in <= worker_out", rep.Header)
	}

	rep, err = nc.Request("test.respond", []byte("plain"), 5*time.Second)
	if err != nil {
		t.Fatalf("untraced request: %v", err)
	}
	if string(rep.Data) != "plain" || len(rep.Header) != 0 {
		t.Errorf("untraced reply %q with headers %v, want the payload and no headers", rep.Data, rep.Header)
	}
}

func TestBusfloorConfigValidate(t *testing.T) {
	ok := Config{Mode: ModeInproc, N: 1}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"inproc", func(*Config) {}, ""},
		{"tcp", func(c *Config) { c.Mode, c.NATSURL = ModeTCP, "nats://127.0.0.1:4222" }, ""},
		{"empty payload, no gap", func(c *Config) { c.PayloadBytes, c.Gap = 0, 0 }, ""},
		{"bad mode", func(c *Config) { c.Mode = "udp" }, "mode must be"},
		{"no mode", func(c *Config) { c.Mode = "" }, "mode must be"},
		{"tcp without url", func(c *Config) { c.Mode = ModeTCP }, "needs a NATS URL"},
		{"inproc with url", func(c *Config) { c.NATSURL = "nats://x:1" }, "for mode tcp only"},
		{"n 0", func(c *Config) { c.N = 0 }, "need n >= 1"},
		{"negative warmup", func(c *Config) { c.Warmup = -1 }, "need n >= 1"},
		{"negative gap", func(c *Config) { c.Gap = -time.Microsecond }, "must not be negative"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "must not be negative"},
		{"negative gomaxprocs", func(c *Config) { c.GOMAXPROCS = -1 }, "must not be negative"},
		{"negative payload", func(c *Config) { c.PayloadBytes = -1 }, "payload must be"},
		{"payload over the limit", func(c *Config) { c.PayloadBytes = maxPayload }, "payload must be"},
		{"wildcard subject", func(c *Config) { c.Subject = "bench.>" }, "not a literal subject"},
		{"empty token", func(c *Config) { c.Subject = "bench..echo" }, "not a literal subject"},
		{"space in subject", func(c *Config) { c.Subject = "bench echo" }, "not a literal subject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
			if tc.want != "" {
				if _, err := Run(t.Context(), c); err == nil {
					t.Error("Run accepted the invalid config")
				}
			}
		})
	}
}

// TestBusfloorReport checks the text, BENCH_RESULT and Markdown of a
// result with known numbers.
func TestBusfloorReport(t *testing.T) {
	r := &Result{
		Mode: "bus-tcp", N: 2000, Warmup: 200, PayloadBytes: 400, Gap: 300 * time.Microsecond, Pause: summary(2000, 1084210*time.Nanosecond, 0), Subject: Subject,
		NATSURL: "nats://127.0.0.1:4999", GOMAXPROCS: 1, Stamps: true,
		Start: time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC),
		RTT:   summary(2000, 41234*time.Nanosecond, 98765*time.Nanosecond), RequestHop: summary(2000, 20500*time.Nanosecond, 0),
		Responder: summary(2000, 650*time.Nanosecond, 0), ReplyHop: summary(2000, 19949*time.Nanosecond, 0),
		Errors:    3,
		Processes: []Process{{Name: "nats", PID: 11, GOGC: "400", GOMAXPROCS: "1"}, {Name: "responder", PID: 12, GOGC: "400", GOMAXPROCS: "1"}},
	}
	want := "BENCH_RESULT mode=bus-tcp n=2000 gap_us=300 pause_p50_us=1084.2 payload=400 rtt_p50_us=41.2 rtt_p99_us=98.8 hop1_p50_us=20.5 hop2_p50_us=19.9 gomaxprocs=1 responder_p50_us=0.7 errors=3 stamps=true"
	if got := r.BenchLine(); got != want {
		t.Errorf("BenchLine =\n%s\nwant\n%s", got, want)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"mode=bus-tcp n=2000", "gap=300µs (pause p50 1084.2µs)", "p50     41.2µs", "p99     98.8µs", "errors 3", "request hop  p50     20.5µs", "reply hop    p50     19.9µs", "started responder (pid 12, GOGC=400 GOMAXPROCS=1)"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, b.String())
		}
	}
	md := r.Markdown()
	for _, s := range []string{"## Bus round trip: mode=bus-tcp", "a 300µs pause asked for after each (pause p50 1084.2µs)", "| round trip ", "| request hop ", "| reply hop ", " 41.2 |", " 20.5 |", "nats://127.0.0.1:4999", "responder: pid 12, GOGC=400, GOMAXPROCS=1.", "Requester GOMAXPROCS=1, GOGC=unset (100)."} {
		if !strings.Contains(md, s) {
			t.Errorf("Markdown lacks %q:\n%s", s, md)
		}
	}
	if err := r.Check(); err != nil {
		t.Errorf("Check with 3 of 2000 failed: %v, want nil (limit 1%%)", err)
	}

	r.Stamps, r.RequestHop, r.Responder, r.ReplyHop = false, summary(0, 0, 0), summary(0, 0, 0), summary(0, 0, 0)
	if got := r.BenchLine(); !strings.HasSuffix(got, " hop1_p50_us=0.0 hop2_p50_us=0.0 gomaxprocs=1 responder_p50_us=0.0 errors=3 stamps=false") {
		t.Errorf("BenchLine without stamps = %s", got)
	}
	b.Reset()
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if md := r.Markdown(); strings.Contains(b.String(), "request hop") || strings.Contains(md, "| request hop") || !strings.Contains(b.String(), "no stamps") || !strings.Contains(md, "No stamps") {
		t.Errorf("without stamps, text:\n%s\nMarkdown:\n%s\nwant no hop rows and a note", b.String(), md)
	}
	r.Errors = 21
	if err := r.Check(); err == nil || !strings.Contains(err.Error(), "21 of 2000") {
		t.Errorf("Check with 21 of 2000 failed = %v, want an error", err)
	}
}

func summary(n int, p50, p99 time.Duration) stats.Summary {
	return stats.Summary{N: n, P50: p50, P99: p99}
}

func TestBusfloorPayload(t *testing.T) {
	for _, n := range []int{0, 1, 400, 5000} {
		p := Payload(n)
		if len(p) != n || bytes.ContainsAny(p, "\r\n\x00") {
			t.Errorf("Payload(%d) = %d bytes %q", n, len(p), strconv.Quote(string(p[:min(n, 40)])))
		}
	}
}
