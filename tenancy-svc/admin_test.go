package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
	"github.com/switchyard-mcp/switchyard/testutil/syncbuf"
)

// adminRig is a ready tenancy service with the configured tenant "cfg"
// (anonymous) and a client connection.
type adminRig struct {
	s  *server.Server
	nc *nats.Conn
}

func newAdminRig(t *testing.T) *adminRig {
	t.Helper()
	s := natstest.Start(t)
	cfgTenant := tn("cfg")
	cfgTenant.Anonymous = true
	r := start(t, s, Config{Tenants: []tenancy.Tenant{cfgTenant}, Version: "1.2.3"})
	waitReady(t, r.svc)
	return &adminRig{s: s, nc: natstest.Connect(t, s)}
}

// wantCode checks that e is an admin error with code whose message
// mentions every one of msg.
func wantCode(t *testing.T, e *tenancy.AdminError, code string, msg ...string) {
	t.Helper()
	if e == nil {
		t.Fatalf("no error, want code %s", code)
	}
	if e.Code != code {
		t.Errorf("error %v, want code %s", e, code)
	}
	for _, m := range msg {
		if !strings.Contains(e.Message, m) {
			t.Errorf("error %q does not mention %q", e.Message, m)
		}
	}
}

func TestTenancyAdminDiscovery(t *testing.T) {
	rig := newAdminRig(t)
	msg, err := rig.nc.Request("$SRV.PING."+tenancy.AdminService, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("$SRV.PING: %v", err)
	}
	var ping micro.Ping
	if err := json.Unmarshal(msg.Data, &ping); err != nil {
		t.Fatal(err)
	}
	if ping.Name != tenancy.AdminService || ping.Version != "1.2.3" || ping.Type != micro.PingResponseType {
		t.Errorf("PING = %+v", ping)
	}
	msg, err = rig.nc.Request("$SRV.INFO."+tenancy.AdminService, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("$SRV.INFO: %v", err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, ep := range info.Endpoints {
		if strings.HasPrefix(ep.Subject, tenancy.AdminGroup+".") { // resolve_test checks the others
			subjects = append(subjects, ep.Subject)
		}
	}
	want := []string{
		tenancy.SubjTenantPut, tenancy.SubjTenantGet, tenancy.SubjTenantList, tenancy.SubjTenantDelete,
		tenancy.SubjKeyCreate, tenancy.SubjKeyRevoke, tenancy.SubjKeyList, tenancy.SubjKeyDelete,
	}
	if diff := cmp.Diff(want, subjects); diff != "" {
		t.Errorf("INFO endpoint subjects (-want +got):\n%s", diff)
	}
	// Every admin request counts in STATS.
	mustCall[tenancy.TenantListReply](t, rig.nc, tenancy.SubjTenantList, nil)
	got := settledStats(t, rig.nc, func(got map[string]*micro.EndpointStats) bool {
		return got[tenancy.SubjTenantList] != nil && got[tenancy.SubjTenantList].NumRequests >= 1
	})
	if l := got[tenancy.SubjTenantList]; l == nil || l.NumRequests != 1 {
		t.Errorf("STATS tenant.list = %+v, want 1 request", l)
	}
}

// settledStats reads $SRV.STATS of the admin service, by endpoint subject,
// until settled holds (or 5 s pass): nats.go's micro counts a request once
// its handler has returned, which is after the reply went out.
func settledStats(t *testing.T, nc *nats.Conn, settled func(map[string]*micro.EndpointStats) bool) map[string]*micro.EndpointStats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		msg, err := nc.Request("$SRV.STATS."+tenancy.AdminService, nil, 5*time.Second)
		if err != nil {
			t.Fatalf("$SRV.STATS: %v", err)
		}
		var stats micro.Stats
		if err := json.Unmarshal(msg.Data, &stats); err != nil {
			t.Fatal(err)
		}
		got := map[string]*micro.EndpointStats{}
		for _, ep := range stats.Endpoints {
			got[ep.Subject] = ep
		}
		if settled(got) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A failing admin request counts as an error in $SRV.STATS, and its reply
// carries exactly micro's two error headers and the AdminError body.
func TestTenancyAdminStatsCountErrors(t *testing.T) {
	rig := newAdminRig(t)
	body, _ := json.Marshal(tenancy.TenantGetRequest{Name: "ghost"})
	msg, err := rig.nc.Request(tenancy.SubjTenantGet, body, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := nats.Header{
		micro.ErrorCodeHeader: {tenancy.AdminCodeNotFound},
		micro.ErrorHeader:     {`tenant "ghost" not found`},
	}
	if diff := cmp.Diff(wantHeader, msg.Header); diff != "" {
		t.Errorf("error reply headers (-want +got):\n%s", diff)
	}
	if want := `{"code":"404","message":"tenant \"ghost\" not found"}`; string(msg.Data) != want {
		t.Errorf("error reply body %s, want %s", msg.Data, want)
	}
	mustCall[tenancy.TenantListReply](t, rig.nc, tenancy.SubjTenantList, nil)

	got := settledStats(t, rig.nc, func(got map[string]*micro.EndpointStats) bool {
		g, l := got[tenancy.SubjTenantGet], got[tenancy.SubjTenantList]
		return g != nil && g.NumErrors >= 1 && l != nil && l.NumRequests >= 1
	})
	if g := got[tenancy.SubjTenantGet]; g == nil || g.NumErrors < 1 || !strings.Contains(g.LastError, "ghost") {
		t.Errorf("STATS tenant.get = %+v, want an error whose last_error names ghost", g)
	}
	if l := got[tenancy.SubjTenantList]; l == nil || l.NumRequests != 1 || l.NumErrors != 0 {
		t.Errorf("STATS tenant.list = %+v, want 1 request and no error", l)
	}
}

func TestTenancyAdminTenantPut(t *testing.T) {
	rig := newAdminRig(t)
	acme := tn("acme")
	acme.Selectors = []tenant.Selector{{Claim: "org", Value: "acme"}}
	acme.Policy = policy.Spec{Upstreams: []string{"github"}, Rules: []policy.Rule{{Effect: policy.Deny, Kind: policy.KindTools, Pattern: "github__delete_*"}}, Default: policy.Allow}

	put := mustCall[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: acme})
	if !put.Created || put.Source != tenancy.SourceAdmin || put.Revision == 0 {
		t.Errorf("first put = %+v", put)
	}
	if diff := cmp.Diff(acme, put.Tenant); diff != "" {
		t.Errorf("put tenant (-want +got):\n%s", diff)
	}
	stored := readAll[tenancy.Tenant](t, kvOf(t, rig.s, tenancy.BucketTenants))["acme"]
	if diff := cmp.Diff(acme, stored.v); diff != "" || stored.rev != put.Revision {
		t.Errorf("stored tenant rev %d (reply %d) (-want +got):\n%s", stored.rev, put.Revision, diff)
	}

	acme.Limits.MaxInFlight = 4
	again := mustCall[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: acme})
	if again.Created || again.Revision <= put.Revision || again.Tenant.Limits.MaxInFlight != 4 {
		t.Errorf("second put = %+v", again)
	}
	// Conditional puts: the current revision wins, a stale one is refused.
	acme.Limits.MaxInFlight = 5
	cond := mustCall[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: acme, Revision: again.Revision})
	if cond.Revision <= again.Revision {
		t.Errorf("conditional put = %+v", cond)
	}
	_, e := call[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: acme, Revision: again.Revision})
	wantCode(t, e, tenancy.AdminCodeConflict, "revision")

	anon := tn("anon")
	anon.Anonymous = true
	badPolicy := tn("bad")
	badPolicy.Policy.Default = "sometimes"
	badSel := tn("bad")
	badSel.Selectors = []tenant.Selector{{Claim: "org"}}
	cfgChange := tn("cfg")
	cfgChange.Anonymous = true
	tests := []struct {
		name string
		body any
		code string
		msg  []string
	}{
		{"not a slug", tenancy.TenantPutRequest{Tenant: tn("Acme")}, tenancy.AdminCodeBadRequest, []string{"name:", `"Acme"`}},
		{"policy does not compile", tenancy.TenantPutRequest{Tenant: badPolicy}, tenancy.AdminCodeBadRequest, []string{"policy:", "sometimes"}},
		{"malformed selector", tenancy.TenantPutRequest{Tenant: badSel}, tenancy.AdminCodeBadRequest, []string{"selectors:"}},
		{"unknown field", map[string]any{"tenant": map[string]any{"name": "x", "anonymus": true}}, tenancy.AdminCodeBadRequest, []string{"anonymus"}},
		{"not JSON", json.RawMessage(`"x"`), tenancy.AdminCodeBadRequest, []string{"decode"}},
		{"second anonymous tenant", tenancy.TenantPutRequest{Tenant: anon}, tenancy.AdminCodeConflict, []string{`"cfg" is anonymous`}},
		{"configured tenant", tenancy.TenantPutRequest{Tenant: cfgChange}, tenancy.AdminCodeConflict, []string{"configuration file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e := call[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tt.body)
			wantCode(t, e, tt.code, tt.msg...)
		})
	}
}

func TestTenancyAdminTenantGetList(t *testing.T) {
	rig := newAdminRig(t)
	for _, n := range []string{"zeta", "alpha"} {
		mustCall[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: tn(n)})
	}
	got := mustCall[tenancy.TenantInfo](t, rig.nc, tenancy.SubjTenantGet, tenancy.TenantGetRequest{Name: "zeta"})
	if diff := cmp.Diff(tn("zeta"), got.Tenant); diff != "" || got.Source != tenancy.SourceAdmin || got.Revision == 0 {
		t.Errorf("get zeta = %+v (-want +got tenant):\n%s", got, diff)
	}
	cfg := mustCall[tenancy.TenantInfo](t, rig.nc, tenancy.SubjTenantGet, tenancy.TenantGetRequest{Name: "cfg"})
	if cfg.Source != tenancy.SourceConfig || !cfg.Tenant.Anonymous {
		t.Errorf("get cfg = %+v", cfg)
	}
	_, e := call[tenancy.TenantInfo](t, rig.nc, tenancy.SubjTenantGet, tenancy.TenantGetRequest{Name: "ghost"})
	wantCode(t, e, tenancy.AdminCodeNotFound, `"ghost"`)
	_, e = call[tenancy.TenantInfo](t, rig.nc, tenancy.SubjTenantGet, tenancy.TenantGetRequest{Name: "a.b"})
	wantCode(t, e, tenancy.AdminCodeBadRequest, "slug")

	list := mustCall[tenancy.TenantListReply](t, rig.nc, tenancy.SubjTenantList, tenancy.TenantListRequest{})
	var names, sources []string
	for _, ti := range list.Tenants {
		names, sources = append(names, ti.Tenant.Name), append(sources, ti.Source)
	}
	if diff := cmp.Diff([]string{"alpha", "cfg", "zeta"}, names); diff != "" {
		t.Errorf("list names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"admin", "config", "admin"}, sources); diff != "" {
		t.Errorf("list sources (-want +got):\n%s", diff)
	}
	// An empty body is an empty request.
	msg, err := rig.nc.Request(tenancy.SubjTenantList, nil, 5*time.Second)
	if err != nil || msg.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Errorf("list with an empty body: %v %v", err, msg.Header)
	}
}

func TestTenancyAdminTenantDelete(t *testing.T) {
	rig := newAdminRig(t)
	mustCall[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: tn("acme")})
	mustCall[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: tn("other")})
	var ids []string
	for _, p := range []string{"alice", "bob"} {
		ids = append(ids, mustCall[tenancy.KeyCreateReply](t, rig.nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "acme", Principal: p}).ID)
	}
	mustCall[tenancy.KeyInfo](t, rig.nc, tenancy.SubjKeyRevoke, tenancy.KeyRevokeRequest{ID: ids[1]})
	keep := mustCall[tenancy.KeyCreateReply](t, rig.nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "other", Principal: "carol"})

	del := mustCall[tenancy.TenantDeleteReply](t, rig.nc, tenancy.SubjTenantDelete, tenancy.TenantDeleteRequest{Name: "acme"})
	if del.Name != "acme" || del.KeysDeleted != 2 {
		t.Errorf("delete = %+v, want acme with 2 keys (one revoked)", del)
	}
	keys := kvOf(t, rig.s, tenancy.BucketAPIKeys)
	for _, id := range ids {
		if _, err := keys.Get(t.Context(), id); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("key %s of the deleted tenant: Get error %v", id, err)
		}
	}
	if _, err := keys.Get(t.Context(), keep.ID); err != nil {
		t.Errorf("another tenant's key: %v", err)
	}
	_, e := call[tenancy.TenantInfo](t, rig.nc, tenancy.SubjTenantGet, tenancy.TenantGetRequest{Name: "acme"})
	wantCode(t, e, tenancy.AdminCodeNotFound)

	_, e = call[tenancy.TenantDeleteReply](t, rig.nc, tenancy.SubjTenantDelete, tenancy.TenantDeleteRequest{Name: "acme"})
	wantCode(t, e, tenancy.AdminCodeNotFound)
	_, e = call[tenancy.TenantDeleteReply](t, rig.nc, tenancy.SubjTenantDelete, tenancy.TenantDeleteRequest{Name: "cfg"})
	wantCode(t, e, tenancy.AdminCodeConflict, "configuration file")
	_, e = call[tenancy.TenantDeleteReply](t, rig.nc, tenancy.SubjTenantDelete, tenancy.TenantDeleteRequest{})
	wantCode(t, e, tenancy.AdminCodeBadRequest)

	// Garbage in the bucket (a record that does not decode, a key that is
	// not a slug) can be deleted.
	tenants := kvOf(t, rig.s, tenancy.BucketTenants)
	for _, k := range []string{"junk", "Not_A_Slug"} {
		if _, err := tenants.Put(t.Context(), k, []byte("not msgpack")); err != nil {
			t.Fatal(err)
		}
		mustCall[tenancy.TenantDeleteReply](t, rig.nc, tenancy.SubjTenantDelete, tenancy.TenantDeleteRequest{Name: k})
		if _, err := tenants.Get(t.Context(), k); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("garbage tenant %s after delete: Get error %v", k, err)
		}
	}
}

func TestTenancyAdminKeyCreate(t *testing.T) {
	rig := newAdminRig(t)
	mustCall[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: tn("acme")})
	exp := time.Now().Add(time.Hour).UnixMilli()
	got := mustCall[tenancy.KeyCreateReply](t, rig.nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "acme", Principal: "alice", ExpiresUnixMs: exp})
	id, _, ok := apikey.Parse(got.Key)
	if !ok || id != got.ID {
		t.Fatalf("key create returned id %s and a key that parses %v with id %s", got.ID, ok, id)
	}
	want := tenancy.KeyInfo{ID: id, Tenant: "acme", Principal: "alice", CreatedUnixMs: got.CreatedUnixMs, ExpiresUnixMs: exp, Source: tenancy.SourceAdmin}
	if got.KeyInfo != want || got.CreatedUnixMs == 0 {
		t.Errorf("key info %+v, want %+v", got.KeyInfo, want)
	}
	keys := kvOf(t, rig.s, tenancy.BucketAPIKeys)
	rec := readAll[apikey.Record](t, keys)[id].v
	if err := apikey.Verify(got.Key, &rec, time.Now()); err != nil {
		t.Errorf("stored record does not verify the returned key: %v", err)
	}
	if err := apikey.Verify(got.Key, &rec, time.UnixMilli(exp)); !errors.Is(err, apikey.ErrExpired) {
		t.Errorf("Verify at expiry = %v, want ErrExpired", err)
	}
	assertNoPlaintext(t, keys, got.Key)

	tests := []struct {
		name string
		req  tenancy.KeyCreateRequest
		code string
		msg  []string
	}{
		{"unknown tenant", tenancy.KeyCreateRequest{Tenant: "ghost", Principal: "p"}, tenancy.AdminCodeNotFound, []string{`"ghost"`}},
		{"no tenant", tenancy.KeyCreateRequest{Principal: "p"}, tenancy.AdminCodeBadRequest, []string{"slug"}},
		{"no principal", tenancy.KeyCreateRequest{Tenant: "acme"}, tenancy.AdminCodeBadRequest, []string{"principal"}},
		{"control character", tenancy.KeyCreateRequest{Tenant: "acme", Principal: "a\nb"}, tenancy.AdminCodeBadRequest, []string{"principal"}},
		{"expired already", tenancy.KeyCreateRequest{Tenant: "acme", Principal: "p", ExpiresUnixMs: 1}, tenancy.AdminCodeBadRequest, []string{"expires_unix_ms"}},
		{"negative expiry", tenancy.KeyCreateRequest{Tenant: "acme", Principal: "p", ExpiresUnixMs: -1}, tenancy.AdminCodeBadRequest, []string{"expires_unix_ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e := call[tenancy.KeyCreateReply](t, rig.nc, tenancy.SubjKeyCreate, tt.req)
			wantCode(t, e, tt.code, tt.msg...)
		})
	}
}

func TestTenancyAdminKeyRevokeList(t *testing.T) {
	rig := newAdminRig(t)
	mustCall[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: tn("acme")})
	bob := mustCall[tenancy.KeyCreateReply](t, rig.nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "acme", Principal: "bob"})
	alice := mustCall[tenancy.KeyCreateReply](t, rig.nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "acme", Principal: "alice"})
	anon := mustCall[tenancy.KeyCreateReply](t, rig.nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "cfg", Principal: "svc"})

	rev := mustCall[tenancy.KeyInfo](t, rig.nc, tenancy.SubjKeyRevoke, tenancy.KeyRevokeRequest{ID: bob.ID})
	if !rev.Revoked || rev.ID != bob.ID || rev.Principal != "bob" {
		t.Errorf("revoke = %+v", rev)
	}
	rec := readAll[apikey.Record](t, kvOf(t, rig.s, tenancy.BucketAPIKeys))[bob.ID].v
	if err := apikey.Verify(bob.Key, &rec, time.Now()); !errors.Is(err, apikey.ErrRevoked) {
		t.Errorf("Verify revoked key = %v, want ErrRevoked", err)
	}
	// Revoking again is a no-op that answers the same.
	if again := mustCall[tenancy.KeyInfo](t, rig.nc, tenancy.SubjKeyRevoke, tenancy.KeyRevokeRequest{ID: bob.ID}); again != rev {
		t.Errorf("second revoke = %+v, want %+v", again, rev)
	}
	_, e := call[tenancy.KeyInfo](t, rig.nc, tenancy.SubjKeyRevoke, tenancy.KeyRevokeRequest{ID: strings.Repeat("a", apikey.IDLen)})
	wantCode(t, e, tenancy.AdminCodeNotFound)
	// A whole key given as the id is refused without quoting it: the
	// error's description also stays in $SRV.STATS (last_error), which
	// anyone allowed to monitor the service reads.
	_, e = call[tenancy.KeyInfo](t, rig.nc, tenancy.SubjKeyRevoke, tenancy.KeyRevokeRequest{ID: bob.Key})
	wantCode(t, e, tenancy.AdminCodeBadRequest, "key id")
	if e != nil && strings.Contains(e.Message, bob.Key) {
		t.Errorf("revoke error quotes the key: %q", e.Message)
	}
	if stats, err := rig.nc.Request("$SRV.STATS."+tenancy.AdminService, nil, 5*time.Second); err != nil {
		t.Fatalf("$SRV.STATS: %v", err)
	} else if strings.Contains(string(stats.Data), bob.Key) {
		t.Errorf("$SRV.STATS quotes the key: %s", stats.Data)
	}

	list := mustCall[tenancy.KeyListReply](t, rig.nc, tenancy.SubjKeyList, tenancy.KeyListRequest{Tenant: "acme"})
	want := []tenancy.KeyInfo{alice.KeyInfo, rev}
	if diff := cmp.Diff(want, list.Keys); diff != "" {
		t.Errorf("key list acme (-want +got):\n%s", diff)
	}
	all := mustCall[tenancy.KeyListReply](t, rig.nc, tenancy.SubjKeyList, tenancy.KeyListRequest{})
	if diff := cmp.Diff([]tenancy.KeyInfo{alice.KeyInfo, rev, anon.KeyInfo}, all.Keys); diff != "" {
		t.Errorf("key list (-want +got):\n%s", diff)
	}
	none := mustCall[tenancy.KeyListReply](t, rig.nc, tenancy.SubjKeyList, tenancy.KeyListRequest{Tenant: "ghost"})
	if len(none.Keys) != 0 {
		t.Errorf("keys of an unknown tenant: %+v", none.Keys)
	}
	// The wire form never carries a hash or key. The hash is looked for
	// as a quoted field name: the random key ids, lowercase base32, spell
	// a bare "hash" in about 1 of 27,000 runs, never a quote.
	msg, err := rig.nc.Request(tenancy.SubjKeyList, []byte(`{}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`"hash"`, alice.Key, bob.Key} {
		if strings.Contains(string(msg.Data), bad) {
			t.Errorf("key.list reply contains %q", bad)
		}
	}
	_, e = call[tenancy.KeyListReply](t, rig.nc, tenancy.SubjKeyList, tenancy.KeyListRequest{Tenant: "A B"})
	wantCode(t, e, tenancy.AdminCodeBadRequest)
}

// A key record that does not decode is listed as undecodable (by id
// only), refused by key.revoke with a pointer to key.delete, and deleted
// by key.delete; no reply or log line holds its content.
func TestTenancyAdminUndecodableKey(t *testing.T) {
	s := natstest.Start(t)
	_, cfgRec := keyFor(t, "cfg", "svc")
	var logs syncbuf.Buffer
	svc, err := New(Config{Tenants: []tenancy.Tenant{tn("cfg")}, APIKeys: []apikey.Record{cfgRec}},
		natstest.Connect(t, s), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitReady(t, svc)
	nc := natstest.Connect(t, s)

	alice := mustCall[tenancy.KeyCreateReply](t, nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "cfg", Principal: "alice"})
	const content = "\xc1 syk_not-a-record-but-secret-looking"
	junkID := strings.Repeat("j", apikey.IDLen)
	keys := kvOf(t, s, tenancy.BucketAPIKeys)
	if _, err := keys.Put(t.Context(), junkID, []byte(content)); err != nil {
		t.Fatal(err)
	}
	junk := tenancy.KeyInfo{ID: junkID, Source: tenancy.SourceAdmin, Undecodable: true}

	for _, req := range []tenancy.KeyListRequest{{}, {Tenant: "cfg"}} {
		list := mustCall[tenancy.KeyListReply](t, nc, tenancy.SubjKeyList, req)
		want := []tenancy.KeyInfo{junk, alice.KeyInfo, tenancy.KeyInfoOf(&cfgRec, tenancy.SourceConfig)}
		if diff := cmp.Diff(want, list.Keys, cmpopts.IgnoreFields(tenancy.KeyInfo{}, "CreatedUnixMs")); diff != "" {
			t.Errorf("key list %+v (-want +got):\n%s", req, diff)
		}
	}
	_, e := call[tenancy.KeyInfo](t, nc, tenancy.SubjKeyRevoke, tenancy.KeyRevokeRequest{ID: junkID})
	wantCode(t, e, tenancy.AdminCodeConflict, junkID, "does not decode", "key.delete")
	if e != nil && strings.Contains(e.Message, "secret-looking") {
		t.Errorf("revoke error quotes the record: %q", e.Message)
	}

	if got := mustCall[tenancy.KeyInfo](t, nc, tenancy.SubjKeyDelete, tenancy.KeyDeleteRequest{ID: junkID}); got != junk {
		t.Errorf("delete undecodable = %+v, want %+v", got, junk)
	}
	if _, err := keys.Get(t.Context(), junkID); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("undecodable record after delete: Get error %v", err)
	}
	if got := mustCall[tenancy.KeyInfo](t, nc, tenancy.SubjKeyDelete, tenancy.KeyDeleteRequest{ID: alice.ID}); got != alice.KeyInfo {
		t.Errorf("delete alice = %+v, want %+v", got, alice.KeyInfo)
	}
	list := mustCall[tenancy.KeyListReply](t, nc, tenancy.SubjKeyList, tenancy.KeyListRequest{})
	if len(list.Keys) != 1 || list.Keys[0].ID != cfgRec.ID {
		t.Errorf("key list after deletes: %+v, want only the configured key", list.Keys)
	}

	tests := []struct {
		name string
		id   string
		code string
		msg  []string
	}{
		{"gone", junkID, tenancy.AdminCodeNotFound, []string{junkID}},
		{"configured", cfgRec.ID, tenancy.AdminCodeConflict, []string{"configuration file"}},
		{"not an id", alice.Key, tenancy.AdminCodeBadRequest, []string{"key id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e := call[tenancy.KeyInfo](t, nc, tenancy.SubjKeyDelete, tenancy.KeyDeleteRequest{ID: tt.id})
			wantCode(t, e, tt.code, tt.msg...)
			if e != nil && strings.Contains(e.Message, alice.Key) {
				t.Errorf("error quotes the key: %q", e.Message)
			}
		})
	}
	if l := logs.String(); strings.Contains(l, "secret-looking") || !strings.Contains(l, junkID) {
		t.Errorf("logs should name the undecodable record by id only:\n%s", l)
	}
}

// fakeRequest is a micro.Request that records an error reply.
type fakeRequest struct {
	micro.Request
	code string
	body []byte
}

func (f *fakeRequest) Data() []byte           { return []byte(`{}`) }
func (f *fakeRequest) Reply() string          { return "_INBOX.fake" }
func (f *fakeRequest) Subject() string        { return tenancy.SubjTenantList }
func (f *fakeRequest) Headers() micro.Headers { return nil }
func (f *fakeRequest) Error(code, _ string, data []byte, _ ...micro.RespondOpt) error {
	f.code, f.body = code, data
	return nil
}

// handleAsync runs h on f in a goroutine; the channel closes when it is done.
func handleAsync(h micro.Handler, f *fakeRequest) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); h.Handle(f) }()
	return done
}

// A full mailbox refuses at once; requests queued at shutdown, and those
// that arrive after Run returned, are refused.
func TestTenancyAdminOverload(t *testing.T) {
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	svc, err := New(Config{}, nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := svc.enqueuer(opTenantList, tenancy.SubjTenantList)
	for range mailboxLen {
		svc.mailbox <- newJob(opTenantList, nil)
	}
	f := &fakeRequest{}
	h.Handle(f)
	if f.code != tenancy.AdminCodeUnavailable || !strings.Contains(string(f.body), "overloaded") {
		t.Errorf("full mailbox: code %q body %s", f.code, f.body)
	}
	for len(svc.mailbox) > 0 {
		<-svc.mailbox
	}

	// Queued at shutdown: the waiting handler gets 503.
	f = &fakeRequest{}
	done := handleAsync(h, f)
	svc.mailbox <- <-svc.mailbox // the handler's job is queued
	svc.refuseQueued()
	<-done
	if f.code != tenancy.AdminCodeUnavailable || !strings.Contains(string(f.body), "shutting down") {
		t.Errorf("queued at shutdown: code %q body %s", f.code, f.body)
	}

	// After Run: nothing serves the mailbox any more.
	close(svc.stopped)
	f = &fakeRequest{}
	<-handleAsync(h, f)
	if f.code != tenancy.AdminCodeUnavailable || !strings.Contains(string(f.body), "shutting down") {
		t.Errorf("after Run: code %q body %s", f.code, f.body)
	}
}

func TestTenancyNewTenancyConfig(t *testing.T) {
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	_, good := keyFor(t, "a", "alice")
	anon := tn("b")
	anon.Anonymous = true
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{name: "valid", cfg: Config{Tenants: []tenancy.Tenant{tn("a")}, APIKeys: []apikey.Record{good}, Version: "0.1.0-rc.1+abc"}},
		{name: "bad tenant", cfg: Config{Tenants: []tenancy.Tenant{tn("A")}}, want: []string{"name:"}},
		{name: "two anonymous", cfg: Config{Tenants: []tenancy.Tenant{anon, func() tenancy.Tenant { x := tn("c"); x.Anonymous = true; return x }()}}, want: []string{"anonymous"}},
		{name: "key for an unknown tenant", cfg: Config{APIKeys: []apikey.Record{good}}, want: []string{`tenant "a" is not configured`}},
		{name: "key not loaded", cfg: Config{Tenants: []tenancy.Tenant{tn("a")}, APIKeys: []apikey.Record{{Tenant: "a", Principal: "p"}}}, want: []string{"not a key record"}},
		{name: "duplicate key", cfg: Config{Tenants: []tenancy.Tenant{tn("a")}, APIKeys: []apikey.Record{good, good}}, want: []string{"duplicate"}},
		{name: "no principal", cfg: Config{Tenants: []tenancy.Tenant{tn("a")}, APIKeys: []apikey.Record{func() apikey.Record { r := good; r.Principal = ""; return r }()}}, want: []string{"principal"}},
		{name: "version not semver", cfg: Config{Version: "v1"}, want: []string{`version "v1"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, nc, nil)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("New = %v", err)
				}
				return
			}
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("New = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestTenancyBuildVersion(t *testing.T) {
	if v := buildVersion(); !semver.MatchString(v) {
		t.Errorf("buildVersion() = %q, not semver", v)
	}
}
