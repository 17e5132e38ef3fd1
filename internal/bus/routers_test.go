package bus

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

func beat(t *testing.T, nc *nats.Conn, id string, iv time.Duration, bye bool) {
	t.Helper()
	subj, _ := proto.EvtRouterSubject(id)
	data, _ := proto.Marshal(&proto.RouterHeartbeat{Router: id, IntervalMs: int32(iv / time.Millisecond), Bye: bye})
	if err := nc.Publish(subj, data); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
}

// TestRouters: a router is live from its heartbeat until its Bye, its
// missed heartbeats, or a suspicion it does not answer within
// SuspectGrace; Pick takes the live ones in turn.
func TestRouters(t *testing.T) {
	s := natstest.Start(t)
	nc, pub := natstest.Connect(t, s), natstest.Connect(t, s)
	r := NewRouters(nc)
	var mu sync.Mutex
	var gone []string
	r.OnGone = func(id string, said bool) {
		mu.Lock()
		gone = append(gone, fmt.Sprint(id, "/", said))
		mu.Unlock()
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush() // the subscription is the server's
	go func() { _ = r.Run(t.Context()) }()
	if r.Pick() != "" {
		t.Fatal("a router picked before any heartbeat")
	}
	beat(t, pub, "ra", 300*time.Millisecond, false)
	beat(t, pub, "rb", time.Hour, false) // a nonsense interval counts as 1 s
	waitFor(t, "ra and rb live", func() bool { return r.Live("ra") && r.Live("rb") })
	seen := map[string]bool{}
	for range 4 {
		seen[r.Pick()] = true
	}
	if !seen["ra"] || !seen["rb"] {
		t.Fatalf("picked %v", seen)
	}
	beat(t, pub, "rb", time.Second, true) // Bye
	waitFor(t, "rb gone at its Bye", func() bool { return !r.Live("rb") })
	waitFor(t, "ra gone after missed heartbeats", func() bool { return !r.Live("ra") })
	r.Suspect("nobody") // unknown: nothing
	beat(t, pub, "rc", time.Hour, false)
	waitFor(t, "rc live", func() bool { return r.Live("rc") })
	r.Suspect("rc")
	if r.Live("rc") || r.Pick() != "" {
		t.Fatal("a suspected router is still live")
	}
	mu.Lock()
	if len(gone) != 2 {
		t.Errorf("gone %v at the suspicion, want rb and ra only", gone)
	}
	mu.Unlock()
	waitFor(t, "rc gone after the grace", func() bool { mu.Lock(); defer mu.Unlock(); return len(gone) == 3 })
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"rb/true", "ra/false", "rc/false"}; !slices.Equal(gone, want) {
		t.Fatalf("gone %v, want %v", gone, want)
	}
}

// TestRoutersSuspectBack: a suspected router that heartbeats within
// SuspectGrace (its connection moved to another NATS node) is live again
// and not gone: the calls it holds are not given up; one that says Bye
// during the grace is gone as having said so.
func TestRoutersSuspectBack(t *testing.T) {
	s := natstest.Start(t)
	nc, pub := natstest.Connect(t, s), natstest.Connect(t, s)
	r := NewRouters(nc)
	gone := make(chan string, 4)
	r.OnGone = func(id string, said bool) { gone <- fmt.Sprint(id, "/", said) }
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	go func() { _ = r.Run(t.Context()) }()
	beat(t, pub, "ra", time.Hour, false)
	beat(t, pub, "rb", time.Hour, false)
	waitFor(t, "ra and rb live", func() bool { return r.Live("ra") && r.Live("rb") })
	r.Suspect("ra")
	r.Suspect("rb")
	beat(t, pub, "ra", time.Hour, false) // back
	beat(t, pub, "rb", time.Hour, true)  // Bye
	waitFor(t, "ra live again", func() bool { return r.Live("ra") })
	select {
	case g := <-gone:
		if g != "rb/true" {
			t.Fatalf("gone %s, want rb/true", g)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("rb's Bye during the grace: not gone")
	}
	select {
	case g := <-gone:
		t.Fatalf("gone %s after the grace: ra came back, rb was gone already", g)
	case <-time.After(SuspectGrace + 500*time.Millisecond):
	}
	// Suspected, back, suspected again: the first suspicion's end does
	// not cut the second's grace short.
	start := time.Now()
	r.Suspect("ra")
	beat(t, pub, "ra", time.Hour, false)
	waitFor(t, "ra live again", func() bool { return r.Live("ra") })
	time.Sleep(SuspectGrace / 2)
	second := time.Now()
	r.Suspect("ra")
	select {
	case g := <-gone:
		if since := time.Since(second); since < SuspectGrace-100*time.Millisecond {
			t.Fatalf("gone %s %v after the second suspicion (%v after the first), want a whole grace", g, since, time.Since(start))
		}
	case <-time.After(3 * SuspectGrace):
		t.Fatal("ra never gone after its second suspicion")
	}
}

// TestCallerFailRouter: only the calls sent to that router and not placed
// yet fail, with ErrRouterLost.
func TestCallerFailRouter(t *testing.T) {
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	c := NewCaller(nc, 0)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	unplaced, placed, other := c.New(), c.New(), c.New()
	unplaced.SendToRouter("ra")
	placed.SendToRouter("ra")
	placed.placed("w1", nil)
	other.SendToRouter("rb")
	c.FailRouter("ra", ErrRouterLost)
	if _, err := unplaced.Wait(t.Context()); err != ErrRouterLost { //nolint:errorlint // the sentinel itself
		t.Fatalf("unplaced call: %v", err)
	}
	for _, k := range []*Call{placed, other} {
		select {
		case <-k.done:
			t.Fatal("a placed or other router's call failed")
		default:
		}
	}
}

// TestRoutersDraining: a draining router stays live (its calls are not
// failed) but is picked no more.
func TestRoutersDraining(t *testing.T) {
	s := natstest.Start(t)
	nc, pub := natstest.Connect(t, s), natstest.Connect(t, s)
	r := NewRouters(nc)
	gone := make(chan string, 2)
	r.OnGone = func(id string, _ bool) { gone <- id }
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	go func() { _ = r.Run(t.Context()) }()
	beat(t, pub, "ra", time.Second, false)
	beat(t, pub, "rb", time.Second, false)
	waitFor(t, "ra and rb live", func() bool { return r.Live("ra") && r.Live("rb") })
	subj, _ := proto.EvtRouterSubject("ra")
	data, _ := proto.Marshal(&proto.RouterHeartbeat{Router: "ra", IntervalMs: 1000, Draining: true})
	_ = pub.Publish(subj, data)
	_ = pub.Flush()
	waitFor(t, "ra picked no more", func() bool {
		for range 4 {
			if r.Pick() == "ra" {
				return false
			}
		}
		return true
	})
	if !r.Live("ra") || len(gone) != 0 {
		t.Fatal("a draining router counted gone")
	}
}
