package bus

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/provisiontest"
)

func newJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, natstest.Start(t)))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// createBucket makes a bucket as tenancy-svc provisions them (history 1).
func createBucket(t *testing.T, js jetstream.JetStream, name string) jetstream.KeyValue {
	t.Helper()
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: name, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestBusBucket: Bucket opens an existing bucket and never creates one.
func TestBusBucket(t *testing.T) {
	js := newJS(t)
	ctx := t.Context()
	_, err := Bucket(ctx, js, "test_bucket")
	if !errors.Is(err, ErrNotProvisioned) || !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("Bucket of a missing bucket = %v, want ErrNotProvisioned", err)
	}
	if _, err := js.KeyValue(ctx, "test_bucket"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("Bucket created the bucket (%v): only its owner may", err)
	}
	created := createBucket(t, js, "test_bucket")
	if _, err := created.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	kv, err := Bucket(ctx, js, "test_bucket")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "v1" {
		t.Fatalf("k = %v, %v; want v1", e, err)
	}
}

// TestBusSecret: Secret waits for the key to be provisioned.
func TestBusSecret(t *testing.T) {
	js := newJS(t)
	got := make(chan []byte, 1)
	errs := make(chan error, 1)
	go func() {
		v, err := Secret(t.Context(), js, "grants", nil)
		if err != nil {
			errs <- err
			return
		}
		got <- v
	}()
	kv := createBucket(t, js, proto.BucketKeys)
	if _, err := kv.Create(t.Context(), "grants", []byte("s3cr3t")); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-got:
		if string(v) != "s3cr3t" {
			t.Fatalf("Secret = %q", v)
		}
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("Secret did not return within 10s of the key's creation")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Secret(ctx, js, "absent", nil); err == nil {
		t.Fatal("Secret of an absent key returned with a canceled context")
	}
}

func TestBusBucketCanceled(t *testing.T) {
	js := newJS(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Bucket(ctx, js, "never"); err == nil {
		t.Fatal("Bucket with a canceled context succeeded")
	}
}

// watchItem is one fn call of Watch.
type watchItem struct {
	Key     string
	Value   string
	Deleted bool
	Initial bool
}

func TestBusWatch(t *testing.T) {
	type step struct {
		key    string
		value  string // "" with del
		del    bool
		expect watchItem
	}
	tests := []struct {
		name   string
		before []step // applied before Watch starts
		want   []watchItem
		after  []step // applied once the initial marker arrived
	}{
		{
			name: "empty bucket",
			want: []watchItem{{Initial: true}},
			after: []step{
				{key: "a", value: "1", expect: watchItem{Key: "a", Value: "1"}},
				{key: "a", del: true, expect: watchItem{Key: "a", Deleted: true}},
			},
		},
		{
			name: "existing values, then changes",
			before: []step{
				{key: "a", value: "1"},
				{key: "b", value: "2"},
				{key: "a", value: "3"},
			},
			want: []watchItem{
				{Key: "b", Value: "2"},
				{Key: "a", Value: "3"},
				{Initial: true},
			},
			after: []step{
				{key: "c", value: "4", expect: watchItem{Key: "c", Value: "4"}},
				{key: "b", value: "5", expect: watchItem{Key: "b", Value: "5"}},
				{key: "a", del: true, expect: watchItem{Key: "a", Deleted: true}},
				{key: "a", value: "6", expect: watchItem{Key: "a", Value: "6"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js := newJS(t)
			kv := createBucket(t, js, "watched")
			var err error
			apply := func(s step) {
				t.Helper()
				if s.del {
					err = kv.Delete(t.Context(), s.key)
				} else {
					_, err = kv.Put(t.Context(), s.key, []byte(s.value))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range tt.before {
				apply(s)
			}
			items := make(chan watchItem, 64)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- Watch(ctx, js, "watched", func(ev *KVEvent, initial bool) {
					if initial {
						if ev != nil {
							t.Errorf("initial marker with event %+v", ev)
						}
						items <- watchItem{Initial: true}
						return
					}
					items <- watchItem{Key: ev.Key, Value: string(ev.Value), Deleted: ev.Deleted}
				})
			}()
			var got []watchItem
			for len(got) < len(tt.want) {
				got = append(got, recv(t, items, "initial watch events"))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("initial events (-want +got):\n%s", diff)
			}
			for _, s := range tt.after {
				apply(s)
				if diff := cmp.Diff(s.expect, recv(t, items, "watch event")); diff != "" {
					t.Errorf("after %+v (-want +got):\n%s", s, diff)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Watch returned %v after cancel, want nil", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Watch did not return within 5s of cancel")
			}
		})
	}
}

// TestBusWatchWaitsForBucket: Watch of a bucket not provisioned yet does
// not create it; it delivers the initial marker once the bucket exists.
func TestBusWatchWaitsForBucket(t *testing.T) {
	js := newJS(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	initial := make(chan bool, 1)
	go func() {
		_ = Watch(ctx, js, "made_later", func(_ *KVEvent, init bool) {
			if init {
				initial <- true
			}
		})
	}()
	select {
	case <-initial:
		t.Fatal("initial marker before the bucket exists")
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := js.KeyValue(t.Context(), "made_later"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("Watch created the bucket (%v)", err)
	}
	createBucket(t, js, "made_later")
	recv(t, initial, "initial marker once the bucket exists")
}

func TestBusWatchWithoutJetStreamReturnsOnCancel(t *testing.T) {
	// A JetStream handle on a closed connection fails every call: Watch
	// keeps retrying and must still return once ctx ends.
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	calls := make(chan struct{}, 1)
	go func() {
		done <- Watch(ctx, js, "unreachable", func(*KVEvent, bool) { calls <- struct{}{} })
	}()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return within 5s of cancel")
	}
	select {
	case <-calls:
		t.Error("fn called without a connection")
	default:
	}
}

// TestFollowSecret: a changed secret is handed over once per change.
func TestFollowSecret(t *testing.T) {
	s := provisiontest.Start(t)
	nc := natstest.Connect(t, s)
	js, _ := jetstream.New(nc)
	first, err := Secret(t.Context(), js, proto.KeyTasks, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 4)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go FollowSecret(ctx, js, proto.KeyTasks, first, 20*time.Millisecond, func(b []byte) { got <- b })
	time.Sleep(100 * time.Millisecond)
	select {
	case b := <-got:
		t.Fatalf("an unchanged secret handed over: %x", b)
	default:
	}
	kv, _ := js.KeyValue(t.Context(), proto.BucketKeys)
	next := bytes.Repeat([]byte{7}, len(first))
	if _, err := kv.Put(t.Context(), proto.KeyTasks, next); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, next) {
			t.Fatalf("handed %x", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the change was not handed over")
	}
	time.Sleep(100 * time.Millisecond)
	if len(got) != 0 {
		t.Fatal("one change handed over twice")
	}
}
