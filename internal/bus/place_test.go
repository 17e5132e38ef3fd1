package bus

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// TestPlace: a session's calls go to the worker with the highest score
// whatever the order the workers are listed in; sessions spread; calls
// without a session take the workers in turn.
func TestPlace(t *testing.T) {
	workers := []string{"w-1", "w-2", "w-3", "w-4"}
	reversed := []string{"w-4", "w-3", "w-2", "w-1"}
	seen := map[string]int{}
	for i := range 64 {
		session := fmt.Sprint("s-", i)
		got := workers[Place(workers, "e-1", session, "up", nil)]
		if again := reversed[Place(reversed, "e-1", session, "up", nil)]; again != got {
			t.Fatalf("session %s: %s in one order, %s in the other", session, got, again)
		}
		for _, w := range workers {
			if PlacementScore("e-1", session, "up", w) > PlacementScore("e-1", session, "up", got) {
				t.Fatalf("session %s: placed on %s, but %s scores higher", session, got, w)
			}
		}
		seen[got]++
	}
	if len(seen) != len(workers) {
		t.Fatalf("64 sessions on %v, want all 4 workers used", seen)
	}
	var rr atomic.Uint64
	turns := map[int]int{}
	for range 8 {
		turns[Place(workers, "e-1", "", "up", &rr)]++
	}
	for i := range workers {
		if turns[i] != 2 {
			t.Fatalf("round-robin over 8 calls: %v, want 2 each", turns)
		}
	}
	if got := Place(nil, "e-1", "s", "up", &rr); got != -1 {
		t.Fatalf("no workers: %d, want -1", got)
	}
}
