package tenancy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Config configures the tenancy service.
type Config struct {
	// Upstreams is the catalog to seed. Names must be unique slugs.
	Upstreams []proto.UpstreamSpec
}

// Service is a running tenancy service.
type Service struct {
	cfg   Config
	nc    *nats.Conn
	log   *slog.Logger
	ready atomic.Bool
}

// New validates cfg. It does no I/O.
func New(cfg Config, nc *nats.Conn, log *slog.Logger) (*Service, error) {
	if nc == nil {
		panic("tenancy: nil connection")
	}
	seen := map[string]bool{}
	for _, u := range cfg.Upstreams {
		if !proto.ValidSlug(u.Name) || seen[u.Name] {
			return nil, fmt.Errorf("tenancy: upstream name %q is invalid or duplicate", u.Name)
		}
		seen[u.Name] = true
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, nc: nc, log: log.With(proto.LogComponent, "tenancy")}, nil
}

// Ready reports whether the catalog has been seeded.
func (s *Service) Ready() bool { return s.ready.Load() }

// Run seeds the catalog (retrying while JetStream is unavailable) and then
// waits for ctx to end.
func (s *Service) Run(ctx context.Context) error {
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fmt.Errorf("tenancy: jetstream: %w", err)
	}
	backoff := 100 * time.Millisecond
	for {
		err := s.seed(ctx, js)
		if err == nil {
			break
		}
		s.log.Warn("catalog seed failed, retrying", proto.LogErr, err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	s.ready.Store(true)
	s.log.Info("catalog seeded", "upstreams", len(s.cfg.Upstreams))
	// Reconcile now and then: a NATS server restarted without its store
	// (or an operator's stray edit) must not leave the catalog empty.
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.ready.Store(false)
			return nil
		case <-t.C:
			if err := s.seed(ctx, js); err != nil && ctx.Err() == nil {
				s.log.Warn("catalog reconcile failed", proto.LogErr, err)
			}
		}
	}
}

// reconcileEvery is how often the catalog is checked against the config.
const reconcileEvery = 10 * time.Second

func (s *Service) seed(ctx context.Context, js jetstream.JetStream) error {
	kv, err := bus.Bucket(ctx, js, proto.BucketUpstreams)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, u := range s.cfg.Upstreams {
		want[u.Name] = true
		data, err := proto.Marshal(&u)
		if err != nil {
			return err
		}
		cur, err := kv.Get(ctx, u.Name)
		if err == nil && bytes.Equal(cur.Value(), data) {
			continue
		}
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		if _, err := kv.Put(ctx, u.Name, data); err != nil {
			return err
		}
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return err
	}
	for k := range keys.Keys() {
		if !want[k] {
			if err := kv.Delete(ctx, k); err != nil {
				return err
			}
		}
	}
	return nil
}
