package bus

import (
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after a generous
// deadline with what it was waiting for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	const limit = 10 * time.Second
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", limit, what)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("test ended while waiting for %s", what)
		}
	}
}

// recv returns the next value from ch, failing the test after a generous
// deadline.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10s for %s", what)
	}
	var zero T
	return zero
}
