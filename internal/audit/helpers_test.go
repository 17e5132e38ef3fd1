package audit

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// harness is an embedded server, a connection and a running Publisher.
type harness struct {
	srv *server.Server
	nc  *nats.Conn
	pub *Publisher
	s   *Searcher
}

// provisionStream creates the stream of cfg as tenancy-svc does in a
// deployment (internal/provision): a Publisher only publishes to it.
func provisionStream(t testing.TB, nc *nats.Conn, cfg StreamConfig) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = EnsureStream(t.Context(), js, cfg)
	}
	if err != nil {
		t.Fatalf("provision stream: %v", err)
	}
}

func startHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	provisionStream(t, nc, cfg.Stream)
	pub, err := NewPublisher(nc, cfg, nil)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- pub.Run(t.Context()) }()
	t.Cleanup(func() { <-done }) // t.Context() ends first: Run flushes and returns
	s, err := NewSearcher(nc, cfg.Stream.Name)
	if err != nil {
		t.Fatalf("NewSearcher: %v", err)
	}
	// (Provisioned above.)
	waitFor(t, 10*time.Second, "audit stream created", func() bool {
		_, err := s.js.Stream(t.Context(), s.stream)
		return err == nil
	})
	return &harness{srv: srv, nc: nc, pub: pub, s: s}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("test ended while waiting for %s", what)
		}
	}
}

// waitPublished waits until n events have been acknowledged.
func (h *harness) waitPublished(t testing.TB, n uint64) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("%d events published", n), func() bool {
		st := h.pub.Stats()
		if st.Dropped() > 0 {
			t.Fatalf("events dropped: %+v", st)
		}
		return st.Published >= n
	})
}

var (
	testTenants    = []string{"acme", "globex", "initech"}
	testUpstreams  = []string{"files", "search", "db", "mail"}
	testPrincipals = []string{"alice", "bob", "carol", "dave", "erin"}
	testOutcomes   = []string{OutcomeOK, OutcomeOK, OutcomeOK, OutcomeToolError, "-32602", OutcomeOK, "-32060"}
)

// genEvent returns the i-th synthetic event; its fields cycle with
// co-prime periods so every combination occurs.
func genEvent(i int, t0 time.Time) Event {
	up := testUpstreams[i%len(testUpstreams)]
	out := testOutcomes[i%len(testOutcomes)]
	ev := Event{
		Time:          t0.Add(time.Duration(i) * time.Microsecond),
		Tenant:        testTenants[i%len(testTenants)],
		Principal:     testPrincipals[i%len(testPrincipals)],
		Method:        "tools/call",
		Upstream:      up,
		Name:          fmt.Sprintf("%s_tool_%d", up, i%11),
		Outcome:       out,
		Duration:      time.Duration(1000+i%5000) * time.Microsecond,
		RequestBytes:  int64(200 + i%300),
		ResponseBytes: int64(500 + i%2000),
		TraceID:       fmt.Sprintf("%032x", i),
		EdgeID:        "edge-1",
		Session:       i%2 == 0,
	}
	if i%13 == 0 {
		ev.Method, ev.Name = "tools/list", ""
	}
	if out != OutcomeOK && out != OutcomeToolError {
		fmt.Sscan(out, &ev.ErrorCode)
	} else {
		ev.UpstreamDuration = ev.Duration / 2
	}
	return ev
}
