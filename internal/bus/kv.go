package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket opens the KV bucket name, creating it (history 1, file storage)
// if it does not exist yet. Any role may create it: the configuration is
// the same everywhere, so whoever comes first wins and the rest open it.
func Bucket(ctx context.Context, js jetstream.JetStream, name string) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, name)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("open bucket %s: %w", name, err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, History: 1})
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.KeyValue(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", name, err)
	}
	return kv, nil
}

// KVEvent is one change seen by [Watch]: a put (Value set) or a delete.
type KVEvent struct {
	Key     string
	Value   []byte
	Deleted bool
}

// Watch opens (or creates) bucket and calls fn with every current value,
// then with initial=true once the current values have been delivered, then
// with every change, until ctx ends. fn runs on the calling goroutine. If
// JetStream is unavailable it retries with backoff instead of failing, so a
// role can start before the server is fully ready.
func Watch(ctx context.Context, js jetstream.JetStream, bucket string, fn func(ev *KVEvent, initial bool)) error {
	backoff := 100 * time.Millisecond
	for {
		err := watchOnce(ctx, js, bucket, fn)
		if ctx.Err() != nil {
			return nil
		}
		_ = err // retried below; the caller's readiness reports the gap
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func watchOnce(ctx context.Context, js jetstream.JetStream, bucket string, fn func(*KVEvent, bool)) error {
	kv, err := Bucket(ctx, js, bucket)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("watch closed")
			}
			if e == nil {
				fn(nil, true)
				continue
			}
			ev := &KVEvent{Key: e.Key(), Value: e.Value()}
			ev.Deleted = e.Operation() != jetstream.KeyValuePut
			fn(ev, false)
		}
	}
}
