package capture

import (
	"context"
	"sync"
)

// Slot receives the raw JSON result of one JSON-RPC call. A slot belongs to
// one call attempt: create it with [NewSlot], put it in the call's context
// with [With], read it with [Slot.Result] after the call returns, then
// [Slot.Release] it. Its methods are safe for concurrent use.
type Slot struct {
	stub []byte // immutable; nil: leave the result in place

	mu       sync.Mutex
	result   []byte // guarded by mu
	got      bool   // guarded by mu
	released bool   // guarded by mu
	regs     []reg  // guarded by mu: where this slot is recorded
}

type reg struct {
	t   *Table
	key string
}

// NewSlot returns an empty slot. stub, if non-nil, replaces the result that
// the SDK decodes (for tools/call: `{"content":[]}`); with a nil stub the
// result is copied and left in place, so the SDK decodes (and may cache) the
// real thing.
func NewSlot(stub []byte) *Slot { return &Slot{stub: stub} }

// Result returns the captured raw result bytes and whether one arrived. An
// error response captures nothing.
func (s *Slot) Result() ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result, s.got
}

// fill stores raw, which the slot now owns.
func (s *Slot) fill(raw []byte) {
	s.mu.Lock()
	s.result, s.got = raw, true
	s.mu.Unlock()
}

// Release forgets every pending registration of the slot, so a response
// that never comes (a cancelled call) leaves nothing behind. Idempotent.
func (s *Slot) Release() {
	s.mu.Lock()
	s.released = true
	regs := s.regs
	s.regs = nil
	s.mu.Unlock()
	for _, r := range regs {
		r.t.forget(r.key, s)
	}
}

type slotKey struct{}

// With returns ctx carrying s: calls made with it are captured into s.
func With(ctx context.Context, s *Slot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

// From returns the slot carried by ctx, or nil.
func From(ctx context.Context) *Slot {
	s, _ := ctx.Value(slotKey{}).(*Slot)
	return s
}

// Table maps the JSON-RPC ids of one connection's pending captured calls to
// their slots. Safe for concurrent use.
//
// Lock order: Slot.mu before Table.mu (record); take and forget hold only
// Table.mu.
type Table struct {
	mu sync.Mutex
	m  map[string]*Slot // guarded by mu
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{m: map[string]*Slot{}} }

// record maps key to s unless s was already released.
func (t *Table) record(key string, s *Slot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return
	}
	t.mu.Lock()
	t.m[key] = s
	t.mu.Unlock()
	s.regs = append(s.regs, reg{t, key})
}

// take removes and returns the slot recorded under key, or nil.
func (t *Table) take(key string) *Slot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.m[key]
	if s != nil {
		delete(t.m, key)
	}
	return s
}

func (t *Table) forget(key string, s *Slot) {
	t.mu.Lock()
	if t.m[key] == s {
		delete(t.m, key)
	}
	t.mu.Unlock()
}

// empty reports whether no call is pending. A response can only belong to a
// call recorded before it was sent, so an empty table means the message
// being read cannot be captured.
func (t *Table) empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m) == 0
}

// Len returns the number of pending captured calls (for tests and metrics).
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
