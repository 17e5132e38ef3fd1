// Package toolstore writes upstream list sets to the JetStream KV bucket
// proto.BucketLists (key: proto.ListKey(upstream, kind), value: msgpack
// proto.ListSet).
package toolstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// KV is a ToolStore on JetStream KV. It opens the bucket on first use and
// creates it (history 1) if it does not exist. Safe for concurrent use.
type KV struct {
	js     jetstream.JetStream
	bucket string

	mu sync.Mutex
	kv jetstream.KeyValue // guarded by mu: opened on first use
}

// New returns a store on bucket proto.BucketLists.
func New(js jetstream.JetStream) *KV { return &KV{js: js, bucket: proto.BucketLists} }

// Store writes set under proto.ListKey(set.Upstream, set.Kind) unless the
// stored set has the same Hash and caching hints (TTLMs, CacheScope) and
// set follows no list_changed (set.Notified is 0).
func (s *KV) Store(ctx context.Context, set *proto.ListSet) error {
	kv, err := s.open(ctx)
	if err != nil {
		return err
	}
	key := proto.ListKey(set.Upstream, set.Kind)
	if e, err := kv.Get(ctx, key); err == nil {
		var old proto.ListSet
		if proto.Unmarshal(e.Value(), &old) == nil && old.Hash == set.Hash && old.Upstream == set.Upstream && old.Kind == set.Kind &&
			sameTTL(old.TTLMs, set.TTLMs) && old.CacheScope == set.CacheScope && set.Notified == 0 {
			return nil
		}
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("get %s/%s: %w", s.bucket, key, err)
	}
	data, err := proto.Marshal(set)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, key, data); err != nil {
		return fmt.Errorf("put %s/%s: %w", s.bucket, key, err)
	}
	return nil
}

func (s *KV) open(ctx context.Context) (jetstream.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	kv, err := bus.Bucket(ctx, s.js, s.bucket) // created (history 1) if missing
	if err != nil {
		return nil, err
	}
	s.kv = kv
	return kv, nil
}

func sameTTL(a, b *int64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
