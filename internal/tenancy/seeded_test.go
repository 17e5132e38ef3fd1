package tenancy

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// TestSeedProbeReseed: the probe reads the mark, reads it gone with its
// bucket (the store lost), and calls OnReseed once it is made again; a
// mark that stays as it was is no reseed.
func TestSeedProbeReseed(t *testing.T) {
	nc := natstest.Connect(t, natstest.Start(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seed := func() {
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: BucketSeeded})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, KeySeeded, []byte("1")); err != nil {
			t.Fatal(err)
		}
	}
	seed()
	p := NewSeedProbe(js, 20*time.Millisecond)
	var calls atomic.Int32
	p.OnReseed = func() { calls.Add(1) }
	go p.Run(ctx)
	waitFor(t, slow, "seeded", p.Seeded)
	time.Sleep(100 * time.Millisecond) // several reads of the same mark
	if n := calls.Load(); n != 0 || !p.Reseeded().IsZero() {
		t.Fatalf("the same mark read as %d reseeds", n)
	}
	if err := js.DeleteKeyValue(ctx, BucketSeeded); err != nil {
		t.Fatal(err)
	}
	waitFor(t, slow, "not seeded", func() bool { return !p.Seeded() })
	seed()
	waitFor(t, slow, "reseed seen", func() bool { return calls.Load() == 1 })
	if !p.Seeded() || p.Reseeded().IsZero() {
		t.Fatalf("after a reseed: Seeded %v, Reseeded %v", p.Seeded(), p.Reseeded())
	}
}
