package tenancy

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SeedProbe follows tenancy-svc's [KeySeeded] mark in [BucketSeeded]: the
// mark is there once tenancy-svc has seeded the store, and gone after the
// NATS store was lost until tenancy-svc has made and seeded it again. A
// role whose readiness depends on the catalog and the tenants is not
// ready while the mark is gone: what it holds may be older than the
// store, and what the store holds is being rebuilt.
//
// A mark made anew (the store was lost and seeded again) counts as a
// reseed: OnReseed is called, and Reseeded says when.
//
// Seeded and Reseeded are safe for concurrent use; OnReseed is set before
// Run, which is called once.
type SeedProbe struct {
	// OnReseed, if not nil, is called (on Run's goroutine) each time the
	// probe finds a mark made after the one it saw before: the store was
	// lost and tenancy-svc has seeded it again. The roles write back there
	// what they hold that the store lost (the edges: their sessions'
	// records).
	OnReseed func()

	js       jetstream.JetStream
	every    time.Duration
	seeded   atomic.Bool
	reseeded atomic.Int64 // Unix nanoseconds of the last reseed seen; 0: none
	created  time.Time    // Run's goroutine only: the mark's creation last read
}

// NewSeedProbe returns a probe reading the mark every interval (0: 1 s).
func NewSeedProbe(js jetstream.JetStream, interval time.Duration) *SeedProbe {
	if interval <= 0 {
		interval = time.Second
	}
	return &SeedProbe{js: js, every: interval}
}

// Seeded reports whether the mark was there at the last read (false
// before the first read).
func (p *SeedProbe) Seeded() bool { return p.seeded.Load() }

// Reseeded returns when the probe last found the mark made anew (zero
// before any reseed).
func (p *SeedProbe) Reseeded() time.Time {
	if n := p.reseeded.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Run reads the mark every interval until ctx ends. A read that fails for
// another reason than the mark or its bucket missing (NATS unreachable)
// keeps the last answer.
func (p *SeedProbe) Run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		p.read(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *SeedProbe) read(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	kv, err := p.js.KeyValue(ctx, BucketSeeded)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		p.seeded.Store(false)
		return
	case err != nil:
		return
	}
	e, err := kv.Get(ctx, KeySeeded)
	switch {
	case err == nil:
		p.seeded.Store(true)
		if c := e.Created(); !c.Equal(p.created) {
			again := !p.created.IsZero()
			p.created = c
			if again {
				p.reseeded.Store(time.Now().UnixNano())
				if p.OnReseed != nil {
					p.OnReseed()
				}
			}
		}
	case errors.Is(err, jetstream.ErrKeyNotFound):
		p.seeded.Store(false)
	}
}
