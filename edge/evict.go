package edge

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"time"

	"github.com/switchyard-mcp/switchyard/edge/internal/sessionstore"
	"github.com/switchyard-mcp/switchyard/proto"
)

// An idle 2025-era session costs the edge about 9 KB (the SDK's session,
// its transport and reader goroutine, the edge's record of it;
// docs/benchmarks.md "Latest: idle sessions"). Since any edge can adopt a
// session from its record (adopt.go), one that has been idle here for
// Config.SessionEvictAfter leaves this edge's memory: its next request,
// on any edge, adopts it again. What remains here is a tombstone (its id,
// origin and last use) until its idle timeout, when the session ends for
// all as if it had stayed (unless another edge used it meanwhile).

// evictSweep is how often the evictor looks at the sessions.
const evictSweep = 10 * time.Second

// freeAfterEvicting is how many sessions one sweep must evict before the
// edge hands the freed memory back to the OS at once.
const freeAfterEvicting = 1000

// tombstone is an evicted session awaiting its idle timeout.
type tombstone struct {
	origin string
	last   time.Time
	stored int64 // the activity time this edge last wrote in the record
}

// tombstones holds the evicted sessions by id. Safe for concurrent use.
type tombstones struct {
	mu sync.Mutex
	m  map[string]tombstone // guarded by mu
}

// runEvictor evicts idle sessions and ends the tombstones due, every
// evictSweep, until ctx ends.
func (s *Service) runEvictor(ctx context.Context) {
	if s.cfg.SessionEvictAfter <= 0 {
		return
	}
	t := time.NewTicker(max(min(evictSweep, s.cfg.SessionEvictAfter/2), 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.evictIdle(now)
			s.endTombstones(now)
		}
	}
}

// evictIdle drops from memory the sessions idle here for
// SessionEvictAfter that another edge can adopt (they have a record) and
// that have nothing in progress.
func (s *Service) evictIdle(now time.Time) {
	cutoff := now.Add(-s.cfg.SessionEvictAfter).UnixMilli()
	var idle []*clientSession
	s.sessions.mu.RLock()
	for _, cs := range s.sessions.m {
		if cs.stored.Load() != 0 && cs.timeout > 0 && cs.last.Load() < cutoff && cs.ss != nil && cs.ss.ID() != "" {
			idle = append(idle, cs)
		}
	}
	s.sessions.mu.RUnlock()
	n := 0
	for _, cs := range idle {
		if !cs.quiet() {
			continue
		}
		s.entomb(cs)
		cs.dropOnly.Store(true)
		_ = cs.ss.Close()
		n++
	}
	if n > 0 {
		s.log.Debug("idle sessions evicted from memory", "sessions", n)
	}
	if n >= freeAfterEvicting {
		debug.FreeOSMemory()
	}
}

// entomb records cs's tombstone: it leaves this edge's memory without an
// end, and endTombstones ends it at its idle timeout unless used since.
func (s *Service) entomb(cs *clientSession) {
	s.evicted.mu.Lock()
	defer s.evicted.mu.Unlock()
	if s.evicted.m == nil {
		s.evicted.m = map[string]tombstone{}
	}
	s.evicted.m[cs.id] = tombstone{origin: cs.sessionEdge(s.cfg.ID), last: time.UnixMilli(cs.last.Load()), stored: cs.stored.Load()}
}

// endTombstones ends, for all, each evicted session whose idle timeout has
// passed and that no edge used meanwhile; a session adopted again (here
// or elsewhere) loses its tombstone.
func (s *Service) endTombstones(now time.Time) {
	var due []string
	s.evicted.mu.Lock()
	for id, tb := range s.evicted.m {
		switch {
		case s.sessions.get(id) != nil:
			delete(s.evicted.m, id) // adopted again here
		case now.Sub(tb.last) >= s.cfg.SessionTimeout:
			due = append(due, id)
		}
	}
	s.evicted.mu.Unlock()
	st := s.store.Load()
	if st == nil {
		return
	}
	for _, id := range due {
		s.evicted.mu.Lock()
		tb, ok := s.evicted.m[id]
		s.evicted.mu.Unlock()
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		rec, err := st.Get(ctx, id)
		switch {
		case errors.Is(err, sessionstore.ErrNotFound):
			s.dropTombstone(id, tb) // ended elsewhere
		case err != nil:
			// The store is unreachable: try again at the next sweep.
		case rec.Active > tb.stored && time.Since(time.UnixMilli(rec.Active)) < s.cfg.SessionTimeout:
			// Used since on another edge (a newer activity than this
			// edge wrote): look again when that use has idled out too.
			s.evicted.mu.Lock()
			if cur, ok := s.evicted.m[id]; ok && cur == tb {
				s.evicted.m[id] = tombstone{origin: tb.origin, last: time.UnixMilli(rec.Active), stored: rec.Active}
			}
			s.evicted.mu.Unlock()
		default:
			if s.dropTombstone(id, tb) && s.sessions.get(id) == nil {
				if err := st.Delete(ctx, id); err != nil {
					s.log.Warn("session record not deleted", proto.LogSession, id, proto.LogErr, err)
				}
				s.publishClosed(tb.origin, id)
			}
		}
		cancel()
	}
}

// dropTombstone removes id's tombstone if it is still tb; it reports
// whether it did.
func (s *Service) dropTombstone(id string, tb tombstone) bool {
	s.evicted.mu.Lock()
	defer s.evicted.mu.Unlock()
	if cur, ok := s.evicted.m[id]; ok && cur == tb {
		delete(s.evicted.m, id)
		return true
	}
	return false
}
