package stale

import (
	"errors"
	"testing"
)

func TestState(t *testing.T) {
	var s State
	if st, _, _ := s.Get(); st {
		t.Fatal("the zero State is stale")
	}
	s.Restart(errors.New("not started"))
	st, since, reason := s.Get()
	if !st || since.IsZero() || reason != "not started" {
		t.Fatalf("after Restart: %v %v %q", st, since, reason)
	}
	if first, changed := s.Fail(errors.New("down")); first || !changed {
		t.Fatalf("Fail while stale: first %v changed %v", first, changed)
	}
	if _, since2, reason := s.Get(); !since2.Equal(since) || reason != "down" {
		t.Fatalf("a failure while stale keeps since and takes the reason: %v %q", since2, reason)
	}
	if first, changed := s.Fail(errors.New("down")); first || changed {
		t.Fatalf("the same failure again: first %v changed %v", first, changed)
	}
	if d := s.Clear(); d < 0 {
		t.Fatalf("stale for %v", d)
	}
	if st, _, reason := s.Get(); st || reason != "" {
		t.Fatalf("after Clear: %v %q", st, reason)
	}
	if first, changed := s.Fail(errors.New("down")); !first || !changed {
		t.Fatalf("Fail when fresh: first %v changed %v", first, changed)
	}
}
