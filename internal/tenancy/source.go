package tenancy

// Source is where a role reads the tenancy state on each request: a
// [*Watcher] in production, a [Static] snapshot in tests and single
// configurations. Current must be safe for concurrent use, never return
// nil and not allocate.
type Source interface {
	Current() *Snapshot
}

// Static is a Source that always serves one snapshot.
type Static struct{ Snap *Snapshot }

// Current returns s.Snap.
func (s Static) Current() *Snapshot { return s.Snap }

var _ Source = (*Watcher)(nil)
