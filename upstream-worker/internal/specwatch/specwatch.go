// Package specwatch follows the upstream catalog, the JetStream KV bucket
// proto.BucketUpstreams owned by tenancy-svc (key: upstream name, value:
// msgpack proto.UpstreamSpec).
package specwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Handler receives the catalog. Its methods are called from the Watch
// goroutine, one at a time.
type Handler interface {
	// Put delivers a new or changed valid spec.
	Put(spec proto.UpstreamSpec)
	// Delete says the upstream is gone (deleted, purged or now invalid).
	Delete(name string)
	// Synced is called once the current values have been delivered (after
	// every (re)watch).
	Synced()
}

// Watch opens the bucket (retrying until tenancy-svc has created it),
// watches every key and calls h until ctx ends. If the watch ends early it
// is re-established; a re-established watch replays the current values
// (Put is then called again for unchanged specs). It returns nil when ctx
// ends.
func Watch(ctx context.Context, js jetstream.JetStream, h Handler, log *slog.Logger) error {
	delay := 250 * time.Millisecond
	for {
		err := watchOnce(ctx, js, h, log)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			log.Debug("upstream catalog bucket not there yet", proto.LogErr, err)
		} else {
			log.Warn("upstream catalog watch interrupted", proto.LogErr, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func watchOnce(ctx context.Context, js jetstream.JetStream, h Handler, log *slog.Logger) error {
	kv, err := js.KeyValue(ctx, proto.BucketUpstreams)
	if err != nil {
		return fmt.Errorf("open bucket %s: %w", proto.BucketUpstreams, err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", proto.BucketUpstreams, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watcher closed")
			}
			apply(e, h, log)
		}
	}
}

func apply(e jetstream.KeyValueEntry, h Handler, log *slog.Logger) {
	if e == nil {
		h.Synced()
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		h.Delete(e.Key())
		return
	}
	spec, err := Decode(e.Key(), e.Value())
	if err != nil {
		log.Warn("invalid upstream spec ignored", proto.LogUpstream, e.Key(), proto.LogErr, err)
		h.Delete(e.Key())
		return
	}
	h.Put(spec)
}

// Decode decodes and validates one catalog entry: the name must be a slug
// equal to the key, the transport known, and its URL or command present.
func Decode(key string, value []byte) (proto.UpstreamSpec, error) {
	var s proto.UpstreamSpec
	if err := proto.Unmarshal(value, &s); err != nil {
		return s, fmt.Errorf("upstream %q: %w", key, err)
	}
	var errs []error
	if s.Name != key || !proto.ValidSlug(s.Name) {
		errs = append(errs, fmt.Errorf("name %q must be a slug equal to the key", s.Name))
	}
	switch s.Transport {
	case proto.TransportStreamable, proto.TransportSSE:
		if s.URL == "" {
			errs = append(errs, errors.New("url required"))
		}
	case proto.TransportStdio:
		if len(s.Command) == 0 {
			errs = append(errs, errors.New("command required"))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown transport %q", s.Transport))
	}
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("upstream %q: %w", key, err)
	}
	return s, nil
}
