package tenancy

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

func kvOf(t *testing.T, s *server.Server, name string) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, s))
	if err != nil {
		t.Fatal(err)
	}
	// As the service provisions it (internal/provision: history 1).
	kv, err := js.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: name, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// stored is one record as read back, with its revision.
type stored[T any] struct {
	v   T
	rev uint64
}

func readAll[T any](t *testing.T, kv jetstream.KeyValue) map[string]stored[T] {
	t.Helper()
	keys, err := listKeys(t.Context(), kv)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]stored[T]{}
	for _, k := range keys {
		e, err := kv.Get(t.Context(), k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		var v T
		if err := proto.Unmarshal(e.Value(), &v); err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
		out[k] = stored[T]{v: v, rev: e.Revision()}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// seedOnce runs a service with cfg until it is ready, then stops it.
func seedOnce(t *testing.T, s *server.Server, cfg Config) {
	t.Helper()
	r := start(t, s, cfg)
	waitReady(t, r.svc)
	r.stop(t)
}

func tn(name string) tenancy.Tenant {
	return tenancy.Tenant{Name: name, Policy: policy.Spec{AllUpstreams: true, Default: policy.Allow}}
}

// keyFor mints a key and the record config would seed for it.
func keyFor(t *testing.T, tenantName, principal string) (string, apikey.Record) {
	t.Helper()
	k, _, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	r, err := apikey.NewRecord(k, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r.Tenant, r.Principal = tenantName, principal
	return k, r
}

func TestTenancySeedDefaultTenant(t *testing.T) {
	s := natstest.Start(t)
	seedOnce(t, s, FromFile(&config.File{}))
	got := readAll[tenancy.Tenant](t, kvOf(t, s, tenancy.BucketTenants))
	want := map[string]tenancy.Tenant{"default": {
		Name: "default", Anonymous: true, Policy: policy.Spec{AllUpstreams: true, Default: policy.Allow},
	}}
	gotV := map[string]tenancy.Tenant{}
	for k, v := range got {
		gotV[k] = v.v
	}
	if diff := cmp.Diff(want, gotV); diff != "" {
		t.Errorf("tenants (-want +got):\n%s", diff)
	}
	if _, err := kvOf(t, s, bucketSeeded).Get(t.Context(), "tenant.default"); err != nil {
		t.Errorf("default tenant not marked as seeded: %v", err)
	}
}

func TestTenancySeedTenants(t *testing.T) {
	a, b, c := tn("a"), tn("b"), tn("c")
	a.Selectors = []tenant.Selector{{Claim: "org", Value: "a"}}
	a2 := a
	a2.Limits.Rate = 5
	tests := []struct {
		name        string
		first       []tenancy.Tenant
		second      []tenancy.Tenant
		unchanged   []string
		rewritten   []string
		wantTenants []string
	}{
		{
			name:        "same config writes nothing",
			first:       []tenancy.Tenant{a, b},
			second:      []tenancy.Tenant{b, a},
			unchanged:   []string{"a", "b"},
			wantTenants: []string{"a", "admin-made", "b"},
		},
		{
			name:        "changed, removed and added",
			first:       []tenancy.Tenant{a, b},
			second:      []tenancy.Tenant{a2, c},
			rewritten:   []string{"a"},
			wantTenants: []string{"a", "admin-made", "c"},
		},
		{
			name:        "everything removed but the admin's",
			first:       []tenancy.Tenant{a, b},
			second:      []tenancy.Tenant{},
			wantTenants: []string{"admin-made"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := natstest.Start(t)
			tenants := kvOf(t, s, tenancy.BucketTenants)
			keys := kvOf(t, s, tenancy.BucketAPIKeys)

			// The first config runs with the admin service: a tenant made
			// there, and admin keys for it and for b, which the config owns.
			first := start(t, s, Config{Tenants: tt.first})
			waitReady(t, first.svc)
			nc := natstest.Connect(t, s)
			mustCall[tenancy.TenantPutReply](t, nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: tn("admin-made")})
			adminKey := mustCall[tenancy.KeyCreateReply](t, nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "admin-made", Principal: "p"})
			bKey := mustCall[tenancy.KeyCreateReply](t, nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "b", Principal: "p"})
			first.stop(t)
			before := readAll[tenancy.Tenant](t, tenants)

			seedOnce(t, s, Config{Tenants: tt.second})
			after := readAll[tenancy.Tenant](t, tenants)

			if diff := cmp.Diff(tt.wantTenants, sortedKeys(after)); diff != "" {
				t.Errorf("tenants after the second seed (-want +got):\n%s", diff)
			}
			for _, want := range tt.second {
				if diff := cmp.Diff(want, after[want.Name].v); diff != "" {
					t.Errorf("tenant %s (-want +got):\n%s", want.Name, diff)
				}
			}
			for _, k := range tt.unchanged {
				if before[k].rev != after[k].rev {
					t.Errorf("tenant %s rewritten although unchanged: revision %d -> %d", k, before[k].rev, after[k].rev)
				}
			}
			for _, k := range tt.rewritten {
				if after[k].rev <= before[k].rev {
					t.Errorf("tenant %s not rewritten: revision %d -> %d", k, before[k].rev, after[k].rev)
				}
			}
			// The admin's tenant and its key survive; b's keys go with b.
			if _, err := keys.Get(t.Context(), adminKey.ID); err != nil {
				t.Errorf("admin key of the admin tenant: %v", err)
			}
			_, err := keys.Get(t.Context(), bKey.ID)
			if bGone := !slices.Contains(tt.wantTenants, "b"); bGone != errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Errorf("key of tenant b: Get error %v; tenant b deleted: %v", err, bGone)
			}
			marks, err := listKeys(t.Context(), kvOf(t, s, bucketSeeded))
			if err != nil {
				t.Fatal(err)
			}
			wantMarks := []string{tenancy.KeySeeded} // what edges and routers wait for
			for _, x := range tt.second {
				wantMarks = append(wantMarks, "tenant."+x.Name)
			}
			slices.Sort(marks)
			slices.Sort(wantMarks)
			if diff := cmp.Diff(wantMarks, marks, cmpEmpty); diff != "" {
				t.Errorf("seed marks (-want +got):\n%s", diff)
			}
		})
	}
}

// cmpEmpty equates nil and empty slices.
var cmpEmpty = cmp.FilterValues(func(x, y []string) bool { return len(x) == 0 && len(y) == 0 }, cmp.Comparer(func(_, _ []string) bool { return true }))

func TestTenancySeedAPIKeys(t *testing.T) {
	s := natstest.Start(t)
	keys := kvOf(t, s, tenancy.BucketAPIKeys)
	aliceKey, alice := keyFor(t, "a", "alice")
	bobKey, bob := keyFor(t, "a", "bob")
	cfg := Config{Tenants: []tenancy.Tenant{tn("a"), tn("b")}, APIKeys: []apikey.Record{alice, bob}}
	seedOnce(t, s, cfg)

	got := readAll[apikey.Record](t, keys)
	if diff := cmp.Diff([]string{alice.ID, bob.ID}, sortedKeys(got), cmp.Transformer("sort", func(in []string) []string {
		out := slices.Clone(in)
		slices.Sort(out)
		return out
	})); diff != "" {
		t.Fatalf("key ids (-want +got):\n%s", diff)
	}
	for key, id := range map[string]string{aliceKey: alice.ID, bobKey: bob.ID} {
		r := got[id].v
		if err := apikey.Verify(key, &r, time.Now()); err != nil {
			t.Errorf("stored record %s does not verify its key: %v", id, err)
		}
		assertNoPlaintext(t, keys, key)
	}

	// Same config: nothing rewritten.
	seedOnce(t, s, cfg)
	again := readAll[apikey.Record](t, keys)
	for id := range got {
		if again[id].rev != got[id].rev {
			t.Errorf("key %s rewritten although unchanged", id)
		}
	}

	// An operator revokes alice's key; an admin adds a key for a.
	nc := natstest.Connect(t, s)
	r := start(t, s, cfg)
	waitReady(t, r.svc)
	if info := mustCall[tenancy.KeyInfo](t, nc, tenancy.SubjKeyRevoke, tenancy.KeyRevokeRequest{ID: alice.ID}); !info.Revoked || info.Source != tenancy.SourceConfig {
		t.Errorf("revoke of a configured key = %+v", info)
	}
	extra := mustCall[tenancy.KeyCreateReply](t, nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "a", Principal: "carol"})
	r.stop(t)

	// Next config: alice moves to b (still revoked, same creation time),
	// bob's key is gone, the admin's key stays.
	moved := alice
	moved.Tenant = "b"
	moved.CreatedUnixMs = 1 // the config's clock: ignored for a key already stored
	seedOnce(t, s, Config{Tenants: cfg.Tenants, APIKeys: []apikey.Record{moved}})
	final := readAll[apikey.Record](t, keys)
	if _, ok := final[bob.ID]; ok {
		t.Error("bob's key is no longer configured but still stored")
	}
	if _, ok := final[extra.ID]; !ok {
		t.Error("the admin's key was deleted by seeding")
	}
	a := final[alice.ID].v
	if a.Tenant != "b" || !a.Revoked || a.CreatedUnixMs != alice.CreatedUnixMs {
		t.Errorf("alice's record after the move: %v (created %d, want %d)", a, a.CreatedUnixMs, alice.CreatedUnixMs)
	}
	if err := apikey.Verify(aliceKey, &a, time.Now()); !errors.Is(err, apikey.ErrRevoked) {
		t.Errorf("Verify alice = %v, want ErrRevoked", err)
	}
	marks, err := listKeys(t.Context(), kvOf(t, s, bucketSeeded), "apikey.*")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"apikey." + alice.ID}, marks); diff != "" {
		t.Errorf("key marks (-want +got):\n%s", diff)
	}

	// alice's key leaves the configuration (its record is deleted), then
	// comes back: it is seeded revoked, not valid again.
	seedOnce(t, s, Config{Tenants: cfg.Tenants})
	if _, ok := readAll[apikey.Record](t, keys)[alice.ID]; ok {
		t.Fatal("alice's key is no longer configured but still stored")
	}
	seedOnce(t, s, Config{Tenants: cfg.Tenants, APIKeys: []apikey.Record{moved}})
	back := readAll[apikey.Record](t, keys)[alice.ID].v
	if err := apikey.Verify(aliceKey, &back, time.Now()); !errors.Is(err, apikey.ErrRevoked) {
		t.Errorf("alice's key back in the configuration: Verify = %v, want ErrRevoked", err)
	}
}

// A stored record under a configured key's id that is not that key (a
// different hash) is replaced whole: the configured key, not revoked.
func TestTenancySeedKeyReplacesOtherHash(t *testing.T) {
	s := natstest.Start(t)
	keys := kvOf(t, s, tenancy.BucketAPIKeys)
	key, rec := keyFor(t, "a", "alice")
	other := rec
	other.Hash = bytes.Repeat([]byte{7}, apikey.HashLen)
	other.Revoked = true
	data, err := proto.Marshal(&other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Put(t.Context(), rec.ID, data); err != nil {
		t.Fatal(err)
	}
	seedOnce(t, s, Config{Tenants: []tenancy.Tenant{tn("a")}, APIKeys: []apikey.Record{rec}})
	got := readAll[apikey.Record](t, keys)[rec.ID].v
	if err := apikey.Verify(key, &got, time.Now()); err != nil {
		t.Errorf("Verify = %v, want the configured key to verify", err)
	}
}

// The configuration's keys reach the bucket through config.Load and
// FromFile: from the environment, hash only.
func TestTenancySeedFromConfigFile(t *testing.T) {
	key, _ := keyFor(t, "x", "y")
	t.Setenv("TENANCY_TEST_KEY", key)
	for _, k := range []string{"SWITCHYARD_NATS", "SWITCHYARD_LISTEN", "SWITCHYARD_EDGE_ID", "SWITCHYARD_WORKER_ID", "SWITCHYARD_WORKER_UPSTREAMS"} {
		t.Setenv(k, "")
	}
	path := t.TempDir() + "/c.yaml"
	body := `
tenants:
  - name: acme
    policy: {all_upstreams: true, default: allow}
api_keys:
  - {tenant: acme, principal: alice, key_env: TENANCY_TEST_KEY}
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.Start(t)
	seedOnce(t, s, FromFile(f))
	keys := kvOf(t, s, tenancy.BucketAPIKeys)
	id, _, _ := apikey.Parse(key)
	got := readAll[apikey.Record](t, keys)[id].v
	if got.Tenant != "acme" || got.Principal != "alice" || apikey.Verify(key, &got, time.Now()) != nil {
		t.Errorf("seeded record %v", got)
	}
	assertNoPlaintext(t, keys, key)
	if _, err := kvOf(t, s, tenancy.BucketTenants).Get(t.Context(), config.DefaultTenant); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("default tenant seeded although tenants are configured: %v", err)
	}
}

// assertNoPlaintext fails if any stored value holds key or its secret part.
func assertNoPlaintext(t *testing.T, kv jetstream.KeyValue, key string) {
	t.Helper()
	ids, err := listKeys(t.Context(), kv)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, _ := apikey.Parse(key)
	for _, id := range ids {
		e, err := kv.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(e.Value(), []byte(key)) || bytes.Contains(e.Value(), []byte(key[21:73])) || bytes.Contains(e.Value(), secret.Bytes()) {
			t.Fatalf("record %s holds the key in plaintext", id)
		}
	}
}

// call sends req to subj and decodes the reply into a T, or returns the
// admin error the reply carries.
func call[T any](t *testing.T, nc *nats.Conn, subj string, req any) (T, *tenancy.AdminError) {
	t.Helper()
	var out T
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request(subj, body, 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subj, err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		var e tenancy.AdminError
		if err := json.Unmarshal(msg.Data, &e); err != nil {
			t.Fatalf("%s: error body %q: %v", subj, msg.Data, err)
		}
		if e.Code != code || e.Message != msg.Header.Get("Nats-Service-Error") {
			t.Errorf("%s: error body %+v disagrees with the headers %v", subj, e, msg.Header)
		}
		return out, &e
	}
	if err := json.Unmarshal(msg.Data, &out); err != nil {
		t.Fatalf("%s: reply %q: %v", subj, msg.Data, err)
	}
	return out, nil
}

func mustCall[T any](t *testing.T, nc *nats.Conn, subj string, req any) T {
	t.Helper()
	out, e := call[T](t, nc, subj, req)
	if e != nil {
		t.Fatalf("%s: %v", subj, e)
	}
	return out
}

// A configured key whose variable is unset fails tenancy-svc (only), naming
// the variable.
func TestTenancyFromFileAbsentKey(t *testing.T) {
	for _, k := range []string{"SWITCHYARD_NATS", "SWITCHYARD_LISTEN", "SWITCHYARD_EDGE_ID", "SWITCHYARD_WORKER_ID", "SWITCHYARD_WORKER_UPSTREAMS", "TENANCY_UNSET_KEY"} {
		t.Setenv(k, "")
	}
	path := t.TempDir() + "/c.yaml"
	body := "api_keys:\n  - {tenant: default, principal: ci, key_env: TENANCY_UNSET_KEY}\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load: %v (an absent key is tenancy-svc's problem, not every role's)", err)
	}
	_, err = New(FromFile(f), natstest.Connect(t, natstest.Start(t)), nil)
	if err == nil || !strings.Contains(err.Error(), "api_keys[0] (default/ci): key_env: variable TENANCY_UNSET_KEY is not set") {
		t.Errorf("New = %v", err)
	}
}
