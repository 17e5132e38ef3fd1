package worker

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestRunnerReusesGoroutines: sequential calls run on the goroutine kept
// from the first one (a goroutine per call would show 20 ids). The pause
// after each call lets the kept goroutine get back to waiting; a call that
// comes before it does gets a new one, so a few are allowed.
func TestRunnerReusesGoroutines(t *testing.T) {
	r := newRunner(4)
	defer r.stop()
	ids := map[string]bool{}
	for range 20 {
		idc := make(chan string)
		r.run(func() { idc <- callerGoroutine() })
		ids[<-idc] = true
		time.Sleep(2 * time.Millisecond)
	}
	if len(ids) > 4 {
		t.Fatalf("20 sequential calls ran on %d goroutines, want the kept ones (at most 4)", len(ids))
	}
}

// TestRunnerBound: beyond keep, calls run on goroutines that exit after
// them; stop ends the kept ones.
func TestRunnerBound(t *testing.T) {
	r := newRunner(2)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		r.run(func() {
			defer wg.Done()
			<-release
		})
	}
	if k := r.kept.Load(); k != 2 {
		t.Fatalf("kept %d goroutines with 5 calls running, want 2", k)
	}
	close(release)
	wg.Wait()
	r.stop()
	waitFor(t, func() bool { return r.kept.Load() == 0 }, "the kept goroutines to exit")
	// A call after stop still runs.
	done := make(chan struct{})
	r.run(func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a call after stop did not run")
	}
}

// callerGoroutine identifies the running goroutine by its id in its
// stack trace's header ("goroutine 42 [running]:").
func callerGoroutine() string {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	s := string(b[:n])
	for i := len("goroutine "); i < len(s); i++ {
		if s[i] == ' ' {
			return s[:i]
		}
	}
	return s
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
