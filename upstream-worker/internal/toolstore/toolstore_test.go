package toolstore

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/provisiontest"
)

// TestToolstoreSkipsSameHash: the first Store creates the bucket (history
// 1) and writes; the same hash and hints write nothing; a new hash, a
// Notified set or new caching hints write.
func TestToolstoreSkipsSameHash(t *testing.T) {
	nc := natstest.Connect(t, provisiontest.Start(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := New(js)
	set := &proto.ListSet{Upstream: "up", Kind: proto.KindTools, Items: [][]byte{[]byte(`{"name":"a"}`)}, Hash: 1}
	rev := func() uint64 {
		kv, err := js.KeyValue(t.Context(), proto.BucketLists)
		if err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(t.Context(), "up.tools")
		if err != nil {
			t.Fatal(err)
		}
		return e.Revision()
	}
	ttl := func(n int64) *int64 { return &n }
	for i, want := range []struct {
		hash     uint64
		notified int64
		ttlMs    *int64
		scope    string
		write    bool
	}{
		{1, 0, nil, "", true}, {1, 0, nil, "", false}, {2, 0, nil, "", true}, {2, 7, nil, "", true}, {2, 0, nil, "", false},
		{2, 0, ttl(0), "", true}, {2, 0, ttl(0), "", false}, {2, 0, ttl(5), "", true}, {2, 0, ttl(5), "public", true},
		{2, 0, ttl(5), "public", false}, {2, 0, nil, "public", true}, {2, 0, nil, "", true},
	} {
		before := uint64(0)
		if i > 0 {
			before = rev()
		}
		set.Hash, set.Notified, set.TTLMs, set.CacheScope = want.hash, want.notified, want.ttlMs, want.scope
		if err := s.Store(t.Context(), set); err != nil {
			t.Fatal(err)
		}
		if wrote := rev() != before; wrote != want.write {
			t.Fatalf("step %d: wrote=%v, want %v", i, wrote, want.write)
		}
	}
	kv, _ := js.KeyValue(t.Context(), proto.BucketLists)
	st, err := kv.Status(t.Context())
	if err != nil || st.History() != 1 {
		t.Fatalf("bucket history %v, %v", st, err)
	}
}
