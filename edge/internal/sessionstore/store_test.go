package sessionstore

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/provisiontest"
)

func TestStore(t *testing.T) {
	s := provisiontest.Start(t)
	js, _ := jetstream.New(natstest.Connect(t, s))
	st, err := Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	rec := &proto.SessionRecord{ID: "edge-a-ABC234", Origin: "edge-a", Tenant: "acme", View: "gh", Owner: "u1",
		Protocol: "2025-11-25", Init: []byte(`{"capabilities":{}}`), LogLevel: "info", Active: 1234}
	if err := st.Put(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Origin != rec.Origin || got.Tenant != rec.Tenant || got.View != rec.View || got.Owner != rec.Owner ||
		got.Protocol != rec.Protocol || string(got.Init) != string(rec.Init) || got.LogLevel != rec.LogLevel || got.Active != rec.Active {
		t.Fatalf("got %+v, want %+v", got, rec)
	}
	if err := st.Delete(t.Context(), rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(t.Context(), rec.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := st.Delete(t.Context(), rec.ID); err != nil {
		t.Fatalf("delete twice: %v", err)
	}
	// Ids a client may send that are no key: not found, no KV call.
	for _, id := range []string{"", "a.b", "a*", "a>", "a b", string(make([]byte, 300))} {
		if _, err := st.Get(t.Context(), id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q): %v", id, err)
		}
		if err := st.Put(t.Context(), &proto.SessionRecord{ID: id}); err == nil {
			t.Errorf("Put(%q) accepted", id)
		}
	}
	// A record under the wrong key is refused.
	kv, _ := js.KeyValue(t.Context(), proto.BucketSessions)
	data, _ := proto.Marshal(&proto.SessionRecord{ID: "other"})
	_, _ = kv.Put(t.Context(), "edge-a-X", data)
	if _, err := st.Get(t.Context(), "edge-a-X"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("mismatched record: %v", err)
	}
	_, _ = kv.Put(t.Context(), "edge-a-Y", []byte{0xc1})
	if _, err := st.Get(t.Context(), "edge-a-Y"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("bad msgpack: %v", err)
	}
}

func TestOpenNotProvisioned(t *testing.T) {
	js, _ := jetstream.New(natstest.Connect(t, natstest.Start(t)))
	if _, err := Open(t.Context(), js); !errors.Is(err, bus.ErrNotProvisioned) {
		t.Fatalf("%v", err)
	}
}

// staleKV reads every key as missing, as a replica of a clustered bucket
// that has not yet applied the latest write answers a direct get.
type staleKV struct{ jetstream.KeyValue }

func (staleKV) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	return nil, jetstream.ErrKeyNotFound
}

// TestStoreConfirmsMissingAtLeader: a record a stale replica reads as
// missing is found at the stream's leader; deleted and unknown ones are
// not found there either.
func TestStoreConfirmsMissingAtLeader(t *testing.T) {
	s := provisiontest.Start(t)
	js, _ := jetstream.New(natstest.Connect(t, s))
	st, err := Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	rec := &proto.SessionRecord{ID: "edge-a-NEW234", Origin: "edge-a", Tenant: "acme", Protocol: "2025-11-25"}
	if err := st.Put(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	stale := &Store{kv: staleKV{st.kv}, nc: st.nc}
	got, err := stale.Get(t.Context(), rec.ID)
	if err != nil || got.Origin != "edge-a" || got.Tenant != "acme" {
		t.Fatalf("a record a stale replica misses: %+v, %v", got, err)
	}
	if err := st.Delete(t.Context(), rec.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{rec.ID, "edge-a-NEVER"} {
		if _, err := stale.Get(t.Context(), id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) at the leader: %v, want ErrNotFound", id, err)
		}
	}
}

// TestStoreUpdate: updates of one record from two writers both count (the
// second, whose read went stale, reads again); a deleted record is not
// written again; Exists reads at the leader.
func TestStoreUpdate(t *testing.T) {
	s := provisiontest.Start(t)
	js, _ := jetstream.New(natstest.Connect(t, s))
	st, err := Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	rec := &proto.SessionRecord{ID: "edge-a-UPD234", Origin: "edge-a", Tenant: "acme", Protocol: "2025-11-25"}
	if err := st.Put(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	// The first change writes the record while the second is between its
	// read and its write.
	inner := false
	if _, err := st.Update(t.Context(), rec.ID, func(r *proto.SessionRecord) {
		r.Subs = append(r.Subs, "test://outer")
		if !inner {
			inner = true
			if _, err := st.Update(t.Context(), rec.ID, func(r *proto.SessionRecord) { r.Subs = append(r.Subs, "test://inner") }); err != nil {
				t.Fatal(err)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(t.Context(), rec.ID)
	if err != nil || !slices.Equal(got.Subs, []string{"test://inner", "test://outer"}) {
		t.Fatalf("after two updates: %+v %v", got, err)
	}
	if ok, err := st.Exists(t.Context(), rec.ID); !ok || err != nil {
		t.Fatalf("Exists: %v %v", ok, err)
	}
	if err := st.Delete(t.Context(), rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(t.Context(), rec.ID, func(r *proto.SessionRecord) { r.LogLevel = "info" }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of a deleted record: %v", err)
	}
	if _, err := st.Get(t.Context(), rec.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the deleted record came back: %v", err)
	}
	if ok, err := st.Exists(t.Context(), rec.ID); ok || err != nil {
		t.Fatalf("Exists after delete: %v %v", ok, err)
	}
}
