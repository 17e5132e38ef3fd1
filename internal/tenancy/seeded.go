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
// Seeded is safe for concurrent use; Run is called once.
type SeedProbe struct {
	js     jetstream.JetStream
	every  time.Duration
	seeded atomic.Bool
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
	_, err = kv.Get(ctx, KeySeeded)
	switch {
	case err == nil:
		p.seeded.Store(true)
	case errors.Is(err, jetstream.ErrKeyNotFound):
		p.seeded.Store(false)
	}
}
