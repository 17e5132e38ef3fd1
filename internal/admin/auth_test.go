package admin

import (
	"context"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
)

func TestAdminIsLoopback(t *testing.T) {
	cases := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:9090", true},
		{"127.0.0.2:9090", true}, // all of 127.0.0.0/8
		{"[::1]:9090", true},
		{"[::1%lo]:9090", true},
		{"127.0.0.1", true},
		{"0.0.0.0:9090", false}, // every interface
		{"[::]:9090", false},
		{":9090", false},
		{"10.1.2.3:9090", false},
		{"192.168.0.1:9090", false},
		{"[fe80::1%eth0]:9090", false},
		{"localhost:9090", false}, // a name may resolve anywhere: decided once bound
		{"admin.internal:9090", false},
		{"", false},
	}
	for _, tc := range cases {
		if got := IsLoopback(tc.addr); got != tc.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestAdminStartError(t *testing.T) {
	cases := []struct {
		addr                 string
		configured, insecure bool
		refused              bool
	}{
		{"127.0.0.1:9090", false, false, false},
		{"[::1]:9090", false, false, false},
		{"0.0.0.0:9090", false, false, true},
		{":9090", false, false, true},
		{"10.0.0.5:9090", false, false, true},
		{"0.0.0.0:9090", true, false, false},
		{"0.0.0.0:9090", false, true, false},
		{"0.0.0.0:9090", true, true, false},
	}
	for _, tc := range cases {
		err := NewPolicy(tc.addr, tc.configured, tc.insecure).StartError()
		if (err != nil) != tc.refused {
			t.Errorf("%s configured=%v insecure=%v: err %v, refused want %v", tc.addr, tc.configured, tc.insecure, err, tc.refused)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrNoCredential) {
			t.Errorf("%s: err %v does not wrap ErrNoCredential", tc.addr, err)
		}
		// The message says how to fix it.
		for _, want := range []string{"admin.keys", "SWITCHYARD_ADMIN_KEY", "switchyard keygen", "admin.jwt_claim", "127.0.0.1", "admin.insecure"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err %q does not mention %s", tc.addr, err, want)
			}
		}
	}
}

// cred is a valid credential granting s.
func cred(s Scope) Credential { return Credential{Presented: true, Valid: true, Scope: s} }

func TestAdminDecide(t *testing.T) {
	var (
		loopback     = Policy{Loopback: true, Configured: true}
		loopbackNone = Policy{Loopback: true}
		remote       = Policy{Configured: true}
		remoteNone   = Policy{} // Handler only: such a listener does not start
		insecure     = Policy{Insecure: true}
		insecureKeys = Policy{Insecure: true, Configured: true}
		none         = Credential{}
		invalid      = Credential{Presented: true}
		noScope      = cred(0) // a verified JWT without a mapped claim value
	)
	cases := []struct {
		name   string
		p      Policy
		rule   Rule
		c      Credential
		status int
	}{
		// Health: open everywhere, to everyone.
		{"health remote no credential", remote, RuleOpen, none, 0},
		{"health remote invalid", remote, RuleOpen, invalid, 0},
		{"health remote unconfigured", remoteNone, RuleOpen, none, 0},

		// /metrics on loopback: open, credential or not.
		{"metrics loopback no credential", loopback, RuleMetrics, none, 0},
		{"metrics loopback unconfigured", loopbackNone, RuleMetrics, none, 0},
		{"metrics loopback invalid", loopback, RuleMetrics, invalid, 0},
		// /metrics not on loopback: metrics or admin.
		{"metrics remote no credential", remote, RuleMetrics, none, 401},
		{"metrics remote invalid", remote, RuleMetrics, invalid, 401},
		{"metrics remote metrics", remote, RuleMetrics, cred(ScopeMetrics), 0},
		{"metrics remote admin", remote, RuleMetrics, cred(ScopeAdmin), 0},
		{"metrics remote audit", remote, RuleMetrics, cred(ScopeAudit), 403},
		{"metrics remote no scope", remote, RuleMetrics, noScope, 403},
		{"metrics remote unconfigured", remoteNone, RuleMetrics, none, 403},
		// insecure: as loopback for /metrics.
		{"metrics insecure no credential", insecure, RuleMetrics, none, 0},
		{"metrics insecure with keys", insecureKeys, RuleMetrics, none, 0},

		// The audit search: audit or admin, everywhere.
		{"audit loopback no credential", loopback, RuleAudit, none, 401},
		{"audit loopback invalid", loopback, RuleAudit, invalid, 401},
		{"audit loopback audit", loopback, RuleAudit, cred(ScopeAudit), 0},
		{"audit loopback admin", loopback, RuleAudit, cred(ScopeAdmin), 0},
		{"audit loopback metrics", loopback, RuleAudit, cred(ScopeMetrics), 403},
		{"audit loopback no scope", loopback, RuleAudit, noScope, 403},
		{"audit loopback unconfigured", loopbackNone, RuleAudit, none, 403},
		{"audit remote no credential", remote, RuleAudit, none, 401},
		{"audit remote invalid", remote, RuleAudit, invalid, 401},
		{"audit remote audit", remote, RuleAudit, cred(ScopeAudit), 0},
		{"audit remote admin", remote, RuleAudit, cred(ScopeAdmin), 0},
		{"audit remote metrics", remote, RuleAudit, cred(ScopeMetrics), 403},
		{"audit remote audit+metrics", remote, RuleAudit, cred(ScopeAudit | ScopeMetrics), 0},
		{"audit insecure unconfigured", insecure, RuleAudit, none, 403},
		{"audit insecure no credential", insecureKeys, RuleAudit, none, 401},
		{"audit insecure audit", insecureKeys, RuleAudit, cred(ScopeAudit), 0},

		// An admin-only endpoint.
		{"admin rule audit", remote, Rule{Scope: ScopeAdmin}, cred(ScopeAudit | ScopeMetrics), 403},
		{"admin rule admin", remote, Rule{Scope: ScopeAdmin}, cred(ScopeAdmin), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.p.Decide("/x", tc.rule, tc.c)
			if d.Status != tc.status {
				t.Fatalf("status %d (%q), want %d", d.Status, d.Message, tc.status)
			}
			if d.Allowed() != (tc.status == 0) {
				t.Errorf("Allowed %v with status %d", d.Allowed(), d.Status)
			}
			if (d.Status == 401) != (d.Challenge != "") || (d.Challenge != "" && !strings.HasPrefix(d.Challenge, "Bearer ")) {
				t.Errorf("status %d with challenge %q", d.Status, d.Challenge)
			}
			if d.Status != 0 {
				need := tc.rule.Scope.String()
				if !strings.Contains(d.Message, "scope "+need) || !strings.Contains(d.Message, "/x") {
					t.Errorf("message %q does not name the endpoint and scope %s", d.Message, need)
				}
			}
			if tc.status == 403 && !tc.p.Configured && !strings.Contains(d.Message, "admin.keys") {
				t.Errorf("unconfigured refusal %q does not say to configure admin.keys", d.Message)
			}
		})
	}
}

// testKey is a generated admin key and its Key.
func testKey(t *testing.T, s Scope) (string, Key) {
	t.Helper()
	k, rec, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k, Key{Record: rec, Scope: s}
}

func bearer(tok string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if tok != "" {
		r.Header.Set("Authorization", tok)
	}
	return r
}

func TestAdminAuthKeys(t *testing.T) {
	adminKey, ak := testKey(t, ScopeAdmin)
	metricsKey, mk := testKey(t, ScopeMetrics)
	auditKey, uk := testKey(t, ScopeAudit)
	a, err := NewAuth([]Key{ak, mk, uk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	unknownKey, _ := testKey(t, ScopeAdmin)
	// A key with the id of the admin key and another secret: the id
	// finds the record, the hash comparison (constant time, in
	// apikey.Verify) refuses it.
	otherKey, _ := testKey(t, ScopeAdmin)
	idEnd := len(apikey.Prefix) + apikey.IDLen
	forged := withChecksum(adminKey[:idEnd] + otherKey[idEnd:apikey.KeyLen-7])
	if id, _, ok := apikey.Parse(forged); !ok || id != ak.Record.ID {
		t.Fatalf("forged key does not parse with the admin key's id")
	}
	cases := []struct {
		name   string
		header string
		valid  bool
		scope  Scope
	}{
		{"none", "", false, 0},
		{"admin", "Bearer " + adminKey, true, ScopeAdmin},
		{"scheme case-insensitive", "bearer " + adminKey, true, ScopeAdmin},
		{"metrics", "Bearer " + metricsKey, true, ScopeMetrics},
		{"audit", "Bearer " + auditKey, true, ScopeAudit},
		{"unknown key", "Bearer " + unknownKey, false, 0},
		{"same id, other secret", "Bearer " + forged, false, 0},
		{"truncated key", "Bearer " + adminKey[:len(adminKey)-1], false, 0},
		{"basic", "Basic " + adminKey, false, 0},
		{"empty bearer", "Bearer ", false, 0},
		{"no scheme", adminKey, false, 0},
		{"a JWT without a claim configured", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln", false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := a.Authenticate(bearer(tc.header))
			if c.Presented != (tc.header != "") || c.Valid != tc.valid || c.Scope != tc.scope {
				t.Fatalf("credential %+v, want valid %v scope %v", c, tc.valid, tc.scope)
			}
			if strings.Contains(c.Who+c.Reason, "syk_") {
				t.Errorf("credential names key material: who %q reason %q", c.Who, c.Reason)
			}
		})
	}
	if _, err := NewAuth([]Key{ak, ak}, nil); err == nil {
		t.Error("NewAuth took one key twice")
	}
	if _, err := NewAuth([]Key{{Record: ak.Record}}, nil); err == nil {
		t.Error("NewAuth took a key without a scope")
	}
	if _, err := NewAuth(nil, nil); err == nil {
		t.Error("NewAuth took nothing to verify")
	}
	if _, err := NewAuth(nil, &JWTClaim{Name: "roles"}); err == nil {
		t.Error("NewAuth took a claim without a verifier or values")
	}
}

// withChecksum appends to body (a key without its 7 check characters)
// the CRC-32 that makes it parse, as apikey spells it: big-endian,
// lowercase base32 without padding.
func withChecksum(body string) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE([]byte(body)))
	return body + base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding).EncodeToString(sum[:])
}

func TestAdminServeRefusesWithoutCredential(t *testing.T) {
	// Not bound: a listener that says it is on every interface.
	ln := fakeListener{addr: &net.TCPAddr{IP: net.IPv4zero, Port: 9090}}
	err := New(Config{}, nil).Serve(t.Context(), ln)
	if !errors.Is(err, ErrNoCredential) {
		t.Fatalf("Serve on 0.0.0.0 without credential: %v, want ErrNoCredential", err)
	}
	// Listen refuses an IP literal before binding it.
	if _, err := New(Config{Addr: "0.0.0.0:0"}, nil).Listen(); !errors.Is(err, ErrNoCredential) {
		t.Fatalf("Listen on 0.0.0.0 without credential: %v, want ErrNoCredential", err)
	}
	_, k := testKey(t, ScopeMetrics)
	auth, err := NewAuth([]Key{k}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, c := range []Config{{Auth: auth}, {Insecure: true}} {
		ln := fakeListener{addr: &net.TCPAddr{IP: net.IPv4zero, Port: 9090}, closed: make(chan struct{})}
		if err := New(c, nil).Serve(ctx, ln); err != nil {
			t.Errorf("Serve with auth %v insecure %v: %v", c.Auth != nil, c.Insecure, err)
		}
	}
}

// fakeListener reports addr and has no connections: Accept waits for
// Close.
type fakeListener struct {
	addr   net.Addr
	closed chan struct{}
}

func (l fakeListener) Accept() (net.Conn, error) {
	if l.closed != nil {
		<-l.closed
	}
	return nil, net.ErrClosed
}

func (l fakeListener) Close() error {
	if l.closed != nil {
		select {
		case <-l.closed:
		default:
			close(l.closed)
		}
	}
	return nil
}
func (l fakeListener) Addr() net.Addr { return l.addr }

// stubAudit stands for the audit search handler.
var stubAudit = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"events":[]}`)) })

// do sends GET path with the Authorization header auth ("" for none).
func do(h http.Handler, path, auth string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestAdminEndpointAccess serves every endpoint through the Handler, as a
// listener bound to each kind of address would, to each scope.
func TestAdminEndpointAccess(t *testing.T) {
	adminKey, ak := testKey(t, ScopeAdmin)
	auditKey, uk := testKey(t, ScopeAudit)
	metricsKey, mk := testKey(t, ScopeMetrics)
	unknownKey, _ := testKey(t, ScopeAdmin)
	auth, err := NewAuth([]Key{ak, uk, mk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_test_total", Help: "test"}))
	server := func(addr string, a *Auth, insecure bool) http.Handler {
		s := New(Config{Addr: addr, Gatherer: reg, Auth: a, Insecure: insecure}, nil)
		s.AddRole("edge", &checkRole{checks: []Check{{Name: "upstream", Status: StatusWarn, Detail: "dial tcp 10.9.8.7:443"}}})
		s.Mount("/audit/", RuleAudit, stubAudit)
		return s.Handler()
	}
	const (
		metrics = "/metrics"
		audit   = "/audit/events"
		healthz = "/healthz"
		readyz  = "/readyz"
	)
	type want map[string]int // path -> status
	creds := []struct {
		name, auth string
	}{
		{"none", ""},
		{"unknown", "Bearer " + unknownKey},
		{"metrics", "Bearer " + metricsKey},
		{"audit", "Bearer " + auditKey},
		{"admin", "Bearer " + adminKey},
	}
	listeners := []struct {
		name string
		h    http.Handler
		want map[string]want // credential -> path -> status
	}{
		{"remote with keys", server("0.0.0.0:9090", auth, false), map[string]want{
			"none":    {metrics: 401, audit: 401, healthz: 200, readyz: 200},
			"unknown": {metrics: 401, audit: 401, healthz: 200, readyz: 200},
			"metrics": {metrics: 200, audit: 403, healthz: 200, readyz: 200},
			"audit":   {metrics: 403, audit: 200, healthz: 200, readyz: 200},
			"admin":   {metrics: 200, audit: 200, healthz: 200, readyz: 200},
		}},
		{"loopback with keys", server("127.0.0.1:9090", auth, false), map[string]want{
			"none":    {metrics: 200, audit: 401, healthz: 200, readyz: 200},
			"unknown": {metrics: 200, audit: 401, healthz: 200, readyz: 200},
			"metrics": {metrics: 200, audit: 403, healthz: 200, readyz: 200},
			"audit":   {metrics: 200, audit: 200, healthz: 200, readyz: 200},
			"admin":   {metrics: 200, audit: 200, healthz: 200, readyz: 200},
		}},
		{"loopback without keys", server("127.0.0.1:9090", nil, false), map[string]want{
			"none":    {metrics: 200, audit: 403, healthz: 200, readyz: 200},
			"unknown": {metrics: 200, audit: 403, healthz: 200, readyz: 200},
			"admin":   {metrics: 200, audit: 403, healthz: 200, readyz: 200},
		}},
		{"insecure without keys", server("0.0.0.0:9090", nil, true), map[string]want{
			"none":  {metrics: 200, audit: 403, healthz: 200, readyz: 200},
			"admin": {metrics: 200, audit: 403, healthz: 200, readyz: 200},
		}},
		{"insecure with keys", server("0.0.0.0:9090", auth, true), map[string]want{
			"none":    {metrics: 200, audit: 401, healthz: 200, readyz: 200},
			"metrics": {metrics: 200, audit: 403, healthz: 200, readyz: 200},
			"audit":   {metrics: 200, audit: 200, healthz: 200, readyz: 200},
		}},
	}
	for _, l := range listeners {
		for _, c := range creds {
			w, ok := l.want[c.name]
			if !ok {
				continue
			}
			for path, status := range w {
				t.Run(l.name+"/"+c.name+path, func(t *testing.T) {
					rec := do(l.h, path, c.auth)
					if rec.Code != status {
						t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body)
					}
					body := rec.Body.String()
					if c.auth != "" && strings.Contains(body+strings.Join(rec.Header().Values("WWW-Authenticate"), ""), strings.TrimPrefix(c.auth, "Bearer ")) {
						t.Fatalf("the answer echoes the credential: %s", body)
					}
					switch rec.Code {
					case 401:
						if !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
							t.Errorf("401 without WWW-Authenticate: Bearer (%q)", rec.Header().Get("WWW-Authenticate"))
						}
						fallthrough
					case 403:
						var e struct{ Error string }
						if json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, "scope") {
							t.Errorf("refusal body %q: want {\"error\": ...} naming the scope needed", body)
						}
						if path == audit && !strings.Contains(e.Error, "audit or admin") {
							t.Errorf("audit refusal %q does not name scope audit or admin", e.Error)
						}
						if path == metrics && !strings.Contains(e.Error, "metrics or admin") {
							t.Errorf("metrics refusal %q does not name scope metrics or admin", e.Error)
						}
						if rec.Code == 403 && l.name == "loopback without keys" && !strings.Contains(e.Error, "configure admin.keys") {
							t.Errorf("refusal %q does not say to configure an audit or admin credential", e.Error)
						}
					}
				})
			}
		}
	}
}

// TestAdminReadyzDetails: on a listener that is not trusted the checks'
// details are shown to a valid credential only; the status and the
// summary to everyone.
func TestAdminReadyzDetails(t *testing.T) {
	metricsKey, mk := testKey(t, ScopeMetrics)
	auth, err := NewAuth([]Key{mk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const detail = "dial tcp 10.9.8.7:443"
	for _, tc := range []struct {
		name, addr, auth string
		insecure         bool
		details          bool
	}{
		{"remote anonymous", "0.0.0.0:9090", "", false, false},
		{"remote unknown key", "0.0.0.0:9090", "Bearer syk_nope", false, false},
		{"remote metrics key", "0.0.0.0:9090", "Bearer " + metricsKey, false, true},
		{"loopback anonymous", "127.0.0.1:9090", "", false, true},
		{"insecure anonymous", "0.0.0.0:9090", "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Addr: tc.addr, Auth: auth, Insecure: tc.insecure}, nil)
			s.AddRole("edge", &checkRole{checks: []Check{{Name: "nats", Status: StatusOK}}})
			s.AddRole("upstream-worker", &checkRole{checks: []Check{{Name: "upstream/x", Status: StatusFail, Detail: detail}}})
			rec := do(s.Handler(), "/readyz", tc.auth)
			if rec.Code != 503 || !strings.HasPrefix(rec.Body.String(), "not ready\n") {
				t.Fatalf("/readyz = %d %q, want 503 not ready", rec.Code, rec.Body)
			}
			if strings.Contains(rec.Body.String(), detail) != tc.details {
				t.Errorf("/readyz body %q: details shown %v, want %v", rec.Body, !tc.details, tc.details)
			}
			rec = do(s.Handler(), "/readyz?format=json", tc.auth)
			var rep Report
			if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Ready || len(rep.Roles) != 2 || rep.Roles[1].Ready || (len(rep.Roles[1].Checks) > 0) != tc.details {
				t.Errorf("/readyz JSON %s: details %v", rec.Body, tc.details)
			}
		})
	}
}
