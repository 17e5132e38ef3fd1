package bus

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

func newJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, natstest.Start(t)))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestBusBucket(t *testing.T) {
	js := newJS(t)
	ctx := t.Context()
	created, err := Bucket(ctx, js, "test_bucket")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := created.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	st, err := created.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.History() != 1 {
		t.Errorf("history = %d, want 1", st.History())
	}
	tests := []struct {
		name string
		open func() (jetstream.KeyValue, error)
	}{
		{name: "reopen", open: func() (jetstream.KeyValue, error) { return Bucket(ctx, js, "test_bucket") }},
		{name: "plain open", open: func() (jetstream.KeyValue, error) { return js.KeyValue(ctx, "test_bucket") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv, err := tt.open()
			if err != nil {
				t.Fatal(err)
			}
			e, err := kv.Get(ctx, "k")
			if err != nil {
				t.Fatalf("existing key lost: %v", err)
			}
			if string(e.Value()) != "v1" {
				t.Errorf("k = %q, want v1", e.Value())
			}
		})
	}
}

func TestBusBucketConcurrentCreate(t *testing.T) {
	js := newJS(t)
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := Bucket(t.Context(), js, "raced")
			errs <- err
		}()
	}
	for range n {
		if err := recv(t, errs, "Bucket"); err != nil {
			t.Errorf("concurrent Bucket: %v", err)
		}
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
			kv, err := Bucket(t.Context(), js, "watched")
			if err != nil {
				t.Fatal(err)
			}
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

func TestBusWatchCreatesBucket(t *testing.T) {
	js := newJS(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	initial := make(chan bool, 1)
	go func() {
		_ = Watch(ctx, js, "made_by_watch", func(_ *KVEvent, init bool) {
			if init {
				initial <- true
			}
		})
	}()
	recv(t, initial, "initial marker on a new bucket")
	if _, err := js.KeyValue(t.Context(), "made_by_watch"); err != nil {
		t.Fatalf("bucket not created: %v", err)
	}
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
