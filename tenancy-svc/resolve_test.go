package tenancy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// resolveRig is a ready tenancy service with tenants acme and beta (see
// newResolveRig), its API keys, and a client connection.
type resolveRig struct {
	*adminRig
	keys map[string]string // plaintext by name: alice, expired, mismatch
	recs map[string]apikey.Record
}

func newResolveRig(t *testing.T) *resolveRig {
	t.Helper()
	acme := tenancy.Tenant{
		Name: "acme",
		Selectors: []tenant.Selector{
			{Claim: "org", Value: "acme"},
			{Group: "acme-staff"},
			{Group: "shared"},
		},
		Policy: policy.Spec{
			Upstreams: []string{"github"},
			Rules: []policy.Rule{
				{Effect: policy.Allow, Kind: policy.KindTools, Pattern: "github__get_*"},
				{Effect: policy.Deny, Kind: policy.KindTools, Pattern: "github__*"},
				{Effect: policy.Deny, Kind: policy.KindResources, Pattern: "file:///secret/*"},
			},
			Default: policy.Allow,
		},
	}
	beta := tenancy.Tenant{
		Name: "beta",
		Selectors: []tenant.Selector{
			{Claim: "org", Value: "beta"},
			{Group: "shared"},
			{Issuer: "https://idp.example", Claim: "team", Value: "x", Group: "eng"},
		},
		Policy: policy.Spec{
			AllUpstreams: true,
			Rules:        []policy.Rule{{Effect: policy.Allow, Kind: policy.KindPrompts, Pattern: "*"}},
		},
	}
	r := &resolveRig{keys: map[string]string{}, recs: map[string]apikey.Record{}}
	for _, k := range []struct{ name, tenant, principal string }{
		{"alice", "acme", "alice"}, {"expired", "acme", "old"}, {"mismatch", "beta", "bob"},
	} {
		r.keys[k.name], r.recs[k.name] = keyFor(t, k.tenant, k.principal)
	}
	exp := r.recs["expired"]
	exp.ExpiresUnixMs = time.Now().Add(-time.Hour).UnixMilli()
	r.recs["expired"] = exp
	mis := r.recs["mismatch"]
	mis.Hash = slices.Clone(mis.Hash)
	mis.Hash[0] ^= 1
	r.recs["mismatch"] = mis

	s := natstest.Start(t)
	svc := start(t, s, Config{
		Tenants: []tenancy.Tenant{acme, beta},
		APIKeys: []apikey.Record{r.recs["alice"], r.recs["expired"], r.recs["mismatch"]},
		Version: "1.2.3",
	})
	waitReady(t, svc.svc)
	r.adminRig = &adminRig{s: s, nc: natstest.Connect(t, s)}
	return r
}

// await calls subj with req until check accepts the outcome, for changes
// that reach the service's snapshot asynchronously.
func await[T any](t *testing.T, nc *nats.Conn, subj string, req any, what string, check func(T, *tenancy.AdminError) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		out, e := call[T](t, nc, subj, req)
		if check(out, e) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within 10s (last reply %+v, error %v)", what, out, e)
		}
		<-tick.C
	}
}

func TestTenancyResolveDiscovery(t *testing.T) {
	rig := newResolveRig(t)
	msg, err := rig.nc.Request("$SRV.INFO."+tenancy.AdminService, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("$SRV.INFO: %v", err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	type ep struct{ Name, Subject, QueueGroup string }
	var got []ep
	for _, e := range info.Endpoints {
		if strings.HasPrefix(e.Subject, tenancy.ResolveGroup+".") {
			got = append(got, ep{e.Name, e.Subject, e.QueueGroup})
		}
	}
	want := []ep{
		{"resolve_key", tenancy.SubjResolveKey, tenancy.AdminService},
		{"resolve_principal", tenancy.SubjResolvePrincipal, tenancy.AdminService},
		{"resolve_access", tenancy.SubjResolveAccess, tenancy.AdminService},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("INFO resolve endpoints (-want +got):\n%s", diff)
	}
	if n := len(info.Endpoints); n != len(endpoints)+len(resolveEndpoints) {
		t.Errorf("INFO lists %d endpoints, want %d admin + %d resolve", n, len(endpoints), len(resolveEndpoints))
	}

	// Requests and errors count in STATS, answered on the micro request.
	mustCall[tenancy.ResolvePrincipalReply](t, rig.nc, tenancy.SubjResolvePrincipal, tenancy.ResolvePrincipalRequest{Groups: []string{"acme-staff"}})
	_, e := call[tenancy.ResolvePrincipalReply](t, rig.nc, tenancy.SubjResolvePrincipal, tenancy.ResolvePrincipalRequest{Groups: []string{"nobody"}})
	wantCode(t, e, tenancy.AdminCodeNotFound)
	// nats.go's micro counts a request after its handler replied: the
	// counts are read until they include both calls (bounded).
	var st *micro.EndpointStats
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		msg, err = rig.nc.Request("$SRV.STATS."+tenancy.AdminService, nil, 5*time.Second)
		if err != nil {
			t.Fatalf("$SRV.STATS: %v", err)
		}
		var stats micro.Stats
		if err := json.Unmarshal(msg.Data, &stats); err != nil {
			t.Fatal(err)
		}
		st = nil
		for _, e := range stats.Endpoints {
			if e.Subject == tenancy.SubjResolvePrincipal {
				st = e
			}
		}
		if st == nil {
			t.Fatal("STATS lacks resolve.principal")
		}
		if st.NumRequests >= 2 && st.NumErrors >= 1 || time.Now().After(deadline) {
			break
		}
	}
	if st.NumRequests != 2 || st.NumErrors != 1 || !strings.Contains(st.LastError, "404") {
		t.Errorf("STATS resolve.principal = requests %d errors %d last %q; want 2, 1, a 404", st.NumRequests, st.NumErrors, st.LastError)
	}
}

func TestTenancyResolveKey(t *testing.T) {
	rig := newResolveRig(t)
	alice, aliceRec := rig.keys["alice"], rig.recs["alice"]

	// A key whose record names a tenant the snapshot lacks: written
	// straight to KV, as a tenant deleted by hand would leave it.
	ghostKey, ghostRec := keyFor(t, "ghost", "g")
	value, err := proto.Marshal(&ghostRec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kvOf(t, rig.s, tenancy.BucketAPIKeys).Put(t.Context(), ghostRec.ID, value); err != nil {
		t.Fatal(err)
	}
	// A key revoked through the admin endpoints.
	created := mustCall[tenancy.KeyCreateReply](t, rig.nc, tenancy.SubjKeyCreate, tenancy.KeyCreateRequest{Tenant: "beta", Principal: "carol"})
	await(t, rig.nc, tenancy.SubjResolveKey, tenancy.ResolveKeyRequest{Key: created.Key}, "created key resolves",
		func(r tenancy.ResolveKeyReply, e *tenancy.AdminError) bool { return e == nil && r.Tenant == "beta" })
	mustCall[tenancy.KeyInfo](t, rig.nc, tenancy.SubjKeyRevoke, tenancy.KeyRevokeRequest{ID: created.ID})
	await(t, rig.nc, tenancy.SubjResolveKey, tenancy.ResolveKeyRequest{Key: created.Key}, "revocation seen",
		func(_ tenancy.ResolveKeyReply, e *tenancy.AdminError) bool { return e != nil })
	// The ghost key's record is in the snapshot once the revocation is
	// (it was written before).
	unknown, _ := keyFor(t, "acme", "nobody") // never stored

	got := mustCall[tenancy.ResolveKeyReply](t, rig.nc, tenancy.SubjResolveKey, tenancy.ResolveKeyRequest{Key: alice})
	if want := (tenancy.ResolveKeyReply{Tenant: "acme", Principal: "alice", KeyID: aliceRec.ID}); got != want {
		t.Errorf("resolve.key = %+v, want %+v", got, want)
	}

	tests := []struct {
		name string
		body string // raw request
		key  string // the key in it, which no answer may hold
		code string
		msg  string
	}{
		{"malformed", `{"key":"syk_not-a-key"}`, "syk_not-a-key", tenancy.AdminCodeNotFound, msgKeyInvalid},
		{"unknown id", keyBody(unknown), unknown, tenancy.AdminCodeNotFound, msgKeyInvalid},
		{"hash mismatch", keyBody(rig.keys["mismatch"]), rig.keys["mismatch"], tenancy.AdminCodeNotFound, msgKeyInvalid},
		{"revoked", keyBody(created.Key), created.Key, tenancy.AdminCodeNotFound, msgKeyInvalid},
		{"tenant gone", keyBody(ghostKey), ghostKey, tenancy.AdminCodeNotFound, msgKeyInvalid},
		{"expired", keyBody(rig.keys["expired"]), rig.keys["expired"], tenancy.AdminCodeNotFound, msgKeyExpired},
		{"no key", `{}`, "", tenancy.AdminCodeBadRequest, "key required"},
		{"empty body", ``, "", tenancy.AdminCodeBadRequest, "key required"},
		{"key as a field name", `{"` + alice + `":1}`, alice, tenancy.AdminCodeBadRequest, "decode request"},
		{"key unquoted", `{"key":` + alice + `}`, alice, tenancy.AdminCodeBadRequest, "decode request"},
		{"two values", keyBody(alice) + keyBody(alice), alice, tenancy.AdminCodeBadRequest, "decode request"},
		{"field name in capitals", `{"KEY":"` + alice + `"}`, alice, tenancy.AdminCodeBadRequest, "decode request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := rig.nc.Request(tenancy.SubjResolveKey, []byte(tt.body), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			code, text := msg.Header.Get(micro.ErrorCodeHeader), msg.Header.Get(micro.ErrorHeader)
			var e tenancy.AdminError
			if err := json.Unmarshal(msg.Data, &e); err != nil {
				t.Fatalf("body %q: %v", msg.Data, err)
			}
			if code != tt.code || e.Code != tt.code || text != e.Message || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("answer: headers %v body %s; want code %s mentioning %q", msg.Header, msg.Data, tt.code, tt.msg)
			}
			if tt.msg == msgKeyInvalid && e.Message != msgKeyInvalid {
				t.Errorf("message %q, want exactly %q (no hint at the failed check)", e.Message, msgKeyInvalid)
			}
			if tt.key != "" {
				assertNoKey(t, tt.key, msg.Data, []byte(text))
			}
		})
	}

	// Nor does STATS, which keeps the last error message.
	msg, err := rig.nc.Request("$SRV.STATS."+tenancy.AdminService, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if tt.key != "" {
			assertNoKey(t, tt.key, msg.Data)
		}
	}
}

func keyBody(key string) string { return `{"key":"` + key + `"}` }

// assertNoKey fails if any of bufs holds key or its id-and-secret part.
func assertNoKey(t *testing.T, key string, bufs ...[]byte) {
	t.Helper()
	for _, b := range bufs {
		if bytes.Contains(b, []byte(key)) || len(key) > 8 && bytes.Contains(b, []byte(key[4:])) {
			t.Errorf("%q holds the key", b)
		}
	}
}

func TestTenancyResolvePrincipal(t *testing.T) {
	rig := newResolveRig(t)
	tests := []struct {
		name string
		req  any
		want string // tenant, when no code
		code string
		msg  string
	}{
		{name: "claim", req: tenancy.ResolvePrincipalRequest{Claims: map[string][]string{"org": {"acme"}}}, want: "acme"},
		{name: "claim among others", req: tenancy.ResolvePrincipalRequest{Issuer: "https://other", Claims: map[string][]string{"sub": {"u1"}, "org": {"nope", "beta"}}}, want: "beta"},
		{name: "group", req: tenancy.ResolvePrincipalRequest{Groups: []string{"x", "acme-staff"}}, want: "acme"},
		{name: "two selectors of one tenant", req: tenancy.ResolvePrincipalRequest{Claims: map[string][]string{"org": {"acme"}}, Groups: []string{"acme-staff"}}, want: "acme"},
		{name: "compound", req: tenancy.ResolvePrincipalRequest{Issuer: "https://idp.example", Claims: map[string][]string{"team": {"x"}}, Groups: []string{"eng"}}, want: "beta"},
		{name: "compound, other issuer", req: tenancy.ResolvePrincipalRequest{Issuer: "https://evil.example", Claims: map[string][]string{"team": {"x"}}, Groups: []string{"eng"}}, code: tenancy.AdminCodeNotFound, msg: "no tenant"},
		{name: "compound without issuer", req: tenancy.ResolvePrincipalRequest{Claims: map[string][]string{"team": {"x"}}, Groups: []string{"eng"}}, code: tenancy.AdminCodeNotFound},
		{name: "no match", req: tenancy.ResolvePrincipalRequest{Claims: map[string][]string{"org": {"ACME"}}}, code: tenancy.AdminCodeNotFound, msg: "no tenant"},
		{name: "ambiguous group", req: tenancy.ResolvePrincipalRequest{Groups: []string{"shared"}}, code: tenancy.AdminCodeConflict, msg: "more than one tenant"},
		{name: "ambiguous claims", req: tenancy.ResolvePrincipalRequest{Claims: map[string][]string{"org": {"acme", "beta"}}}, code: tenancy.AdminCodeConflict},
		{name: "empty", req: tenancy.ResolvePrincipalRequest{Issuer: "https://idp.example"}, code: tenancy.AdminCodeBadRequest, msg: "claims or groups required"},
		{name: "claim without values", req: tenancy.ResolvePrincipalRequest{Claims: map[string][]string{"org": nil}}, code: tenancy.AdminCodeBadRequest},
		{name: "empty claim name", req: tenancy.ResolvePrincipalRequest{Claims: map[string][]string{"": {"acme"}}}, code: tenancy.AdminCodeBadRequest, msg: "empty name"},
		{name: "unknown field", req: map[string]any{"group": "acme-staff"}, code: tenancy.AdminCodeBadRequest, msg: "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, e := call[tenancy.ResolvePrincipalReply](t, rig.nc, tenancy.SubjResolvePrincipal, tt.req)
			if tt.code != "" {
				wantCode(t, e, tt.code, tt.msg)
				return
			}
			if e != nil || got.Tenant != tt.want {
				t.Errorf("resolve.principal = %+v, %v; want tenant %q", got, e, tt.want)
			}
		})
	}
}

func TestTenancyResolveAccess(t *testing.T) {
	rig := newResolveRig(t)
	req := func(tenantName, kind, upstream, subject string) tenancy.ResolveAccessRequest {
		return tenancy.ResolveAccessRequest{Tenant: tenantName, Kind: kind, Upstream: upstream, Subject: subject}
	}
	type reply = tenancy.ResolveAccessReply
	tests := []struct {
		name string
		req  any
		want reply
		code string
		msg  string
	}{
		{name: "allowed tool", req: req("acme", "tools", "github", "github__get_issue"), want: reply{Allowed: true, UpstreamVisible: true}},
		{name: "denied tool", req: req("acme", "tools", "github", "github__delete_repo"), want: reply{UpstreamVisible: true}},
		{name: "unseen upstream", req: req("acme", "tools", "gitlab", "gitlab__get_issue"), want: reply{}},
		{name: "default allow", req: req("acme", "prompts", "github", "github__review"), want: reply{Allowed: true, UpstreamVisible: true}},
		{name: "denied resource", req: req("acme", "resources", "github", "file:///secret/a/b"), want: reply{UpstreamVisible: true}},
		{name: "resources rule covers templates", req: req("acme", "resource_templates", "github", "file:///secret/{path}"), want: reply{UpstreamVisible: true}},
		{name: "allowed resource", req: req("acme", "resources", "github", "file:///pub/a"), want: reply{Allowed: true, UpstreamVisible: true}},
		{name: "all upstreams, allowed prompt", req: req("beta", "prompts", "anything", "anything__p"), want: reply{Allowed: true, UpstreamVisible: true}},
		{name: "all upstreams, default deny", req: req("beta", "tools", "anything", "anything__t"), want: reply{UpstreamVisible: true}},
		{name: "unknown tenant", req: req("ghost", "tools", "github", "github__x"), code: tenancy.AdminCodeNotFound, msg: `tenant "ghost" not found`},
		{name: "tenant not a slug", req: req("Acme", "tools", "github", "github__x"), code: tenancy.AdminCodeBadRequest, msg: "slug"},
		{name: "unknown kind", req: req("acme", "tool", "github", "github__x"), code: tenancy.AdminCodeBadRequest, msg: `kind "tool"`},
		{name: "no upstream", req: req("acme", "tools", "", "github__x"), code: tenancy.AdminCodeBadRequest, msg: "upstream"},
		{name: "no subject", req: req("acme", "tools", "github", ""), code: tenancy.AdminCodeBadRequest, msg: "subject required"},
		{name: "unknown field", req: map[string]string{"tenant": "acme", "name": "x"}, code: tenancy.AdminCodeBadRequest, msg: "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, e := call[reply](t, rig.nc, tenancy.SubjResolveAccess, tt.req)
			if tt.code != "" {
				wantCode(t, e, tt.code, tt.msg)
				return
			}
			if e != nil || got != tt.want {
				t.Errorf("resolve.access = %+v, %v; want %+v", got, e, tt.want)
			}
		})
	}

	// A policy change through the admin endpoints reaches the answers.
	gamma := tn("gamma")
	gamma.Policy = policy.Spec{Upstreams: []string{"github"}, Rules: []policy.Rule{{Effect: policy.Deny, Pattern: "github__x"}}, Default: policy.Allow}
	mustCall[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: gamma})
	r := req("gamma", "tools", "github", "github__x")
	await(t, rig.nc, tenancy.SubjResolveAccess, r, "new tenant",
		func(got reply, e *tenancy.AdminError) bool { return e == nil && got == reply{UpstreamVisible: true} })
	gamma.Policy.Rules = nil
	mustCall[tenancy.TenantPutReply](t, rig.nc, tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: gamma})
	await(t, rig.nc, tenancy.SubjResolveAccess, r, "rule removed",
		func(got reply, e *tenancy.AdminError) bool { return e == nil && got.Allowed })
	mustCall[tenancy.TenantDeleteReply](t, rig.nc, tenancy.SubjTenantDelete, tenancy.TenantDeleteRequest{Name: "gamma"})
	await(t, rig.nc, tenancy.SubjResolveAccess, r, "tenant deleted",
		func(_ reply, e *tenancy.AdminError) bool { return e != nil && e.Code == tenancy.AdminCodeNotFound })
}

// resolveRequest is a micro.Request that records the answer.
type resolveRequest struct {
	micro.Request
	data       []byte
	code, body string
	subject    string // "" is tenancy.SubjResolveKey
}

func (f *resolveRequest) Data() []byte { return f.data }
func (f *resolveRequest) Subject() string {
	if f.subject != "" {
		return f.subject
	}
	return tenancy.SubjResolveKey
}
func (f *resolveRequest) Respond(data []byte, _ ...micro.RespondOpt) error {
	f.body = string(data)
	return nil
}

func (f *resolveRequest) Error(code, _ string, data []byte, _ ...micro.RespondOpt) error {
	f.code, f.body = code, string(data)
	return nil
}

// Before the snapshot has loaded, every lookup is 503, never an answer
// from the empty snapshot ("no such key", "no tenant"); an oversized
// request is 400 first.
func TestTenancyResolveNotLoaded(t *testing.T) {
	s := natstest.Start(t)
	var logs bytes.Buffer
	svc, err := New(Config{}, natstest.Connect(t, s), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := keyFor(t, "default", "p")
	for _, ep := range resolveEndpoints {
		subj := tenancy.ResolveGroup + "." + ep.subject
		f := &resolveRequest{data: []byte(keyBody(key)), subject: subj}
		svc.resolver(ep.fn, subj).Handle(f)
		if f.code != tenancy.AdminCodeUnavailable || !strings.Contains(f.body, "not loaded") {
			t.Errorf("%s before load: code %q body %s", ep.name, f.code, f.body)
		}
	}
	f := &resolveRequest{data: make([]byte, maxRequestBytes+1)}
	svc.resolver(resolveKey, tenancy.SubjResolveKey).Handle(f)
	if f.code != tenancy.AdminCodeBadRequest {
		t.Errorf("oversized: code %q body %s", f.code, f.body)
	}
	if svc.Ready() {
		t.Error("Ready before Run")
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("logs hold the key:\n%s", logs.String())
	}
}

// The request type never prints or logs the key.
func TestTenancyResolveKeyRequestRedacted(t *testing.T) {
	key, _ := keyFor(t, "a", "p")
	r := tenancy.ResolveKeyRequest{Key: key}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("request", "req", r)
	for _, s := range []string{fmt.Sprint(r), fmt.Sprintf("%v %+v %#v %s %q %x", r, r, r, r, r, r), fmt.Sprintf("%v", &r), logs.String()} {
		assertNoKey(t, key, []byte(s))
		if !strings.Contains(s, "redacted") {
			t.Errorf("%q does not say the key is redacted", s)
		}
	}
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), key) {
		t.Errorf("JSON %s, %v: want the key (it is the wire form)", b, err)
	}
}
