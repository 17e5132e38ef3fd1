// Package stale tracks whether a component's view of shared state (a KV
// snapshot, a membership list) may lag that state, for health reports:
// stale from the start until the first sync, and from any failure until
// the next one, with when it turned stale and the latest reason.
package stale

import (
	"sync"
	"time"
)

// State is one component's staleness. The zero State is fresh; call
// [State.Restart] to start stale. Safe for concurrent use.
type State struct {
	mu     sync.Mutex
	stale  bool
	since  time.Time
	reason string
}

// Restart marks s stale since now, for reason: a component starting
// (again) before its first sync.
func (s *State) Restart(reason error) {
	s.mu.Lock()
	s.stale, s.since, s.reason = true, time.Now(), reason.Error()
	s.mu.Unlock()
}

// Get reports whether s is stale, since when, and the latest reason.
func (s *State) Get() (stale bool, since time.Time, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stale, s.since, s.reason
}

// Fail marks s stale for err, keeping the time it turned stale if it was
// already. first reports that it was fresh until now and changed that
// the reason differs from the last one, so that a caller logs a failure
// once and a change of cause once more, not every retry.
func (s *State) Fail(err error) (first, changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first, changed = !s.stale, s.reason != err.Error()
	if first {
		s.stale, s.since = true, time.Now()
	}
	s.reason = err.Error()
	return first, changed
}

// Clear marks s fresh and returns how long it was stale.
func (s *State) Clear() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := time.Since(s.since)
	s.stale, s.since, s.reason = false, time.Now(), ""
	return d
}
