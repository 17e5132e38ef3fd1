package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	tenancysvc "github.com/switchyard-mcp/switchyard/tenancy-svc"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// cliResult is one run of the command.
type cliResult struct {
	code           int
	stdout, stderr string
}

// startTenancy runs a tenancy service with the default configuration on
// an embedded NATS server and returns the server's URL.
func startTenancy(t *testing.T) string {
	t.Helper()
	s := natstest.Start(t)
	svc, err := tenancysvc.New(tenancysvc.FromFile(&config.File{}), natstest.Connect(t, s), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return within 5s of cancel")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !svc.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("tenancy service not ready within 10s")
		}
		select {
		case <-t.Context().Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
	return s.ClientURL()
}

func cli(t *testing.T, url, stdin string, args ...string) cliResult {
	t.Helper()
	var out, errOut bytes.Buffer
	if url != "" {
		args = append(args, "--nats", url, "--timeout", "10s")
	}
	code := runTenancy(args, strings.NewReader(stdin), &out, &errOut)
	return cliResult{code: code, stdout: out.String(), stderr: errOut.String()}
}

func mustCLI(t *testing.T, url, stdin string, args ...string) cliResult {
	t.Helper()
	r := cli(t, url, stdin, args...)
	if r.code != 0 {
		t.Fatalf("switchyard tenancy %q: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

func TestTenancyCLIEndToEnd(t *testing.T) {
	url := startTenancy(t)

	r := mustCLI(t, url, "", "tenant", "put", "--name", "acme", "--upstream", "github",
		"--allow", "tools:github__get_*", "--deny", "github__*", "--default", "allow",
		"--claim", "org=acme", "--group", "acme-staff", "--rate", "10", "--burst", "20")
	if !strings.Contains(r.stdout, "tenant acme created") {
		t.Errorf("put output: %q", r.stdout)
	}

	// get prints YAML that put --file takes back.
	r = mustCLI(t, url, "", "tenant", "get", "acme")
	if !strings.HasPrefix(r.stdout, "# tenant acme: revision ") || !strings.Contains(r.stdout, "source admin") {
		t.Errorf("get header: %q", r.stdout)
	}
	file := filepath.Join(t.TempDir(), "acme.yaml")
	if err := os.WriteFile(file, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	r = mustCLI(t, url, "", "tenant", "put", "--file", file, "--max-in-flight", "3", "--max-sessions", "40", "--json")
	var put tenancy.TenantPutReply
	if err := json.Unmarshal([]byte(r.stdout), &put); err != nil {
		t.Fatalf("put --json: %v\n%s", err, r.stdout)
	}
	want := tenancy.Tenant{
		Name: "acme",
		Selectors: []tenant.Selector{
			{Claim: "org", Value: "acme"},
			{Group: "acme-staff"},
		},
		Policy: policy.Spec{
			Upstreams: []string{"github"},
			Rules: []policy.Rule{
				{Effect: policy.Allow, Kind: policy.KindTools, Pattern: "github__get_*"},
				{Effect: policy.Deny, Pattern: "github__*"},
			},
			Default: policy.Allow,
		},
		Limits: tenancy.Limits{Rate: 10, Burst: 20, MaxInFlight: 3, MaxSessions: 40},
	}
	if diff := cmp.Diff(want, put.Tenant); diff != "" || put.Created {
		t.Errorf("round-tripped tenant (created %v) (-want +got):\n%s", put.Created, diff)
	}

	r = mustCLI(t, url, "", "tenant", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") ||
		!strings.HasPrefix(lines[1], "acme ") || !strings.HasPrefix(lines[2], "default ") ||
		!strings.Contains(lines[2], "config") || !strings.Contains(lines[2], "*") {
		t.Errorf("tenant list:\n%s", r.stdout)
	}

	// key create: the key alone on stdout, the rest on stderr.
	r = mustCLI(t, url, "", "key", "create", "--tenant", "acme", "--principal", "alice", "--expires", "24h")
	key := strings.TrimSpace(r.stdout)
	id, _, ok := apikey.Parse(key)
	if !ok {
		t.Fatalf("key create stdout %q is not a key", r.stdout)
	}
	if !strings.Contains(r.stderr, id) || !strings.Contains(r.stderr, "only time") || strings.Contains(r.stderr, key) {
		t.Errorf("key create stderr: %q", r.stderr)
	}
	r = mustCLI(t, url, "", "key", "create", "--tenant", "acme", "--principal", "bob", "--json")
	var created tenancy.KeyCreateReply
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || created.Key == "" || created.Principal != "bob" {
		t.Fatalf("key create --json: %v %+v", err, created)
	}

	r = mustCLI(t, url, "", "key", "list", "--tenant", "acme")
	if !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, created.ID) || strings.Contains(r.stdout, key) {
		t.Errorf("key list:\n%s", r.stdout)
	}
	r = mustCLI(t, url, "", "key", "revoke", id)
	if !strings.Contains(r.stdout, "revoked") {
		t.Errorf("revoke: %q", r.stdout)
	}
	r = mustCLI(t, url, "", "key", "list", "--json")
	var list tenancy.KeyListReply
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Keys) != 2 {
		t.Fatalf("key list --json: %v %s", err, r.stdout)
	}
	for _, k := range list.Keys {
		if (k.ID == id) != k.Revoked {
			t.Errorf("key %+v: revoked should be %v", k, k.ID == id)
		}
	}

	r = mustCLI(t, url, "", "tenant", "delete", "acme")
	if !strings.Contains(r.stdout, "deleted with 2 API keys") {
		t.Errorf("delete: %q", r.stdout)
	}

	// Server-side refusals exit 1 with the code in the message.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tenant", "get", "acme"}, "404"},
		{[]string{"tenant", "delete", "default"}, "configuration file"},
		{[]string{"key", "create", "--tenant", "ghost", "--principal", "p"}, "404"},
		{[]string{"tenant", "put", "--name", "anon2", "--anonymous"}, "409"},
	} {
		r := cli(t, url, "", tc.args...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit %d stderr %q, want 1 mentioning %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// A key record that does not decode lists as such, cannot be revoked,
// and is deleted by key delete.
func TestTenancyCLIUndecodableKey(t *testing.T) {
	url := startTenancy(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := js.KeyValue(t.Context(), tenancy.BucketAPIKeys)
	if err != nil {
		t.Fatal(err)
	}
	junkID := strings.Repeat("j", apikey.IDLen)
	if _, err := keys.Put(t.Context(), junkID, []byte("\xc1 secret-looking junk")); err != nil {
		t.Fatal(err)
	}

	r := mustCLI(t, url, "", "key", "list")
	if !strings.Contains(r.stdout, junkID) || !strings.Contains(r.stdout, "(undecodable)") || strings.Contains(r.stdout, "junk") {
		t.Errorf("key list:\n%s", r.stdout)
	}
	r = cli(t, url, "", "key", "revoke", junkID)
	if r.code != 1 || !strings.Contains(r.stderr, "409") || !strings.Contains(r.stderr, "delete it") {
		t.Errorf("revoke: exit %d stderr %q", r.code, r.stderr)
	}
	r = mustCLI(t, url, "", "key", "delete", junkID)
	if !strings.Contains(r.stdout, junkID) || !strings.Contains(r.stdout, "deleted") {
		t.Errorf("delete: %q", r.stdout)
	}
	if r = mustCLI(t, url, "", "key", "list"); strings.Contains(r.stdout, junkID) {
		t.Errorf("key list after delete:\n%s", r.stdout)
	}
	if r = cli(t, url, "", "key", "delete", junkID); r.code != 1 || !strings.Contains(r.stderr, "404") {
		t.Errorf("delete again: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestTenancyCLINoService(t *testing.T) {
	s := natstest.Start(t) // NATS, but no tenancy-svc
	r := cli(t, s.ClientURL(), "", "tenant", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "no tenancy-svc answers") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
}

// Command lines that fail before any connection.
func TestTenancyCLIUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"nothing", nil, 2, "usage: switchyard tenancy"},
		{"a noun alone", []string{"tenant"}, 2, "usage: switchyard tenancy"},
		{"an unknown word alone", []string{"bogus"}, 2, "usage: switchyard tenancy"},
		{"unknown verb", []string{"tenant", "frobnicate"}, 2, "unknown command"},
		{"unknown noun", []string{"widget", "list"}, 2, "unknown command"},
		{"put without a name", []string{"tenant", "put", "--all-upstreams"}, 2, "--name"},
		{"put with an invalid tenant", []string{"tenant", "put", "--name", "Bad"}, 1, "invalid tenant"},
		{"put with a bad claim", []string{"tenant", "put", "--name", "a", "--claim", "org"}, 2, "NAME=VALUE"},
		{"put with an empty rule", []string{"tenant", "put", "--name", "a", "--allow", "tools:"}, 2, "empty pattern"},
		{"put with a missing file", []string{"tenant", "put", "--file", "/nonexistent.yaml"}, 1, "nonexistent"},
		{"get without a name", []string{"tenant", "get"}, 2, "tenant name required"},
		{"get with two names", []string{"tenant", "get", "a", "b"}, 2, "one tenant name"},
		{"get with name twice", []string{"tenant", "get", "a", "--name", "b"}, 2, "given twice"},
		{"key create without principal", []string{"key", "create", "--tenant", "a"}, 2, "--principal"},
		{"key create with two expiries", []string{"key", "create", "--tenant", "a", "--principal", "p", "--expires", "1h", "--expires-at", "2030-01-01T00:00:00Z"}, 2, "give one"},
		{"key create with a bad time", []string{"key", "create", "--tenant", "a", "--principal", "p", "--expires-at", "tomorrow"}, 2, "--expires-at"},
		{"key revoke without id", []string{"key", "revoke"}, 2, "key id required"},
		{"key delete without id", []string{"key", "delete"}, 2, "key id required"},
		{"key delete with an empty id", []string{"key", "delete", ""}, 2, "key id required"},
		{"tenant delete with an empty name", []string{"tenant", "delete", ""}, 2, "tenant name required"},
		{"key revoke with id twice", []string{"key", "revoke", "a", "--id", "b"}, 2, "given twice"},
		{"unknown flag", []string{"key", "list", "--bogus"}, 2, "bogus"},
		{"resolve alone", []string{"resolve"}, 2, "usage: switchyard tenancy"},
		{"resolve key on the command line", []string{"resolve", "key", "syk_secret"}, 2, "never from the command line"},
		{"resolve key from empty stdin", []string{"resolve", "key"}, 2, "no API key on stdin"},
		{"resolve key from an unset variable", []string{"resolve", "key", "--key-env", "SWITCHYARD_TEST_UNSET_KEY"}, 2, "SWITCHYARD_TEST_UNSET_KEY"},
		{"resolve key --key", []string{"resolve", "key", "--key=syk_secret"}, 2, "-key"},
		{"resolve principal without claims", []string{"resolve", "principal", "--issuer", "https://i"}, 2, "at least one --claim or --group"},
		{"resolve principal with a bad claim", []string{"resolve", "principal", "--claim", "=v"}, 2, "NAME=VALUE"},
		{"resolve access without subject", []string{"resolve", "access", "--tenant", "a", "--kind", "tools", "--upstream", "u"}, 2, "--subject"},
		{"resolve access with a bad kind", []string{"resolve", "access", "--tenant", "a", "--kind", "tool", "--upstream", "u", "--subject", "u__t"}, 2, `--kind "tool"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, "", "", tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", r.code, r.stderr, tt.code, tt.want)
			}
			if strings.Contains(r.stderr, "syk_secret") {
				t.Errorf("stderr %q echoes the key", r.stderr)
			}
		})
	}
	if r := cli(t, "", "", "help"); r.code != 0 || !strings.Contains(r.stdout, "key create") {
		t.Errorf("help: exit %d stdout %q", r.code, r.stdout)
	}
	for _, verb := range [][]string{{"tenant", "list", "-h"}, {"tenant", "get", "-h"}, {"key", "delete", "-h"}} {
		if r := cli(t, "", "", verb...); r.code != 0 {
			t.Errorf("%v: exit %d", verb, r.code)
		}
	}
}

// tenant put builds its request from a file and flags, in order.
func TestTenancyCLIBuildTenant(t *testing.T) {
	const file = `
name: from-file
anonymous: true
selectors: [{group: g1}]
policy:
  upstreams: [a]
  rules: [{effect: deny, pattern: "a__secret_*"}]
limits: {rate: 1}
`
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  tenancy.Tenant
	}{
		{
			name: "flags only",
			args: []string{"--name", "x", "--all-upstreams", "--deny", "prompts:*", "--allow", "file:///pub/*", "--deny", "resources:file:///*", "--default", "allow", "--principal-rate", "2.5", "--principal-burst", "5"},
			want: tenancy.Tenant{Name: "x", Policy: policy.Spec{
				AllUpstreams: true, Default: policy.Allow,
				Rules: []policy.Rule{
					{Effect: policy.Deny, Kind: policy.KindPrompts, Pattern: "*"},
					{Effect: policy.Allow, Pattern: "file:///pub/*"},
					{Effect: policy.Deny, Kind: policy.KindResources, Pattern: "file:///*"},
				},
			}, Limits: tenancy.Limits{PrincipalRate: 2.5, PrincipalBurst: 5}},
		},
		{
			name:  "file from stdin, flags add and override",
			stdin: file,
			args:  []string{"--file", "-", "--name", "renamed", "--anonymous=false", "--upstream", "b", "--allow", "*", "--group", "g2", "--rate", "0"},
			want: tenancy.Tenant{
				Name:      "renamed",
				Selectors: []tenant.Selector{{Group: "g1"}, {Group: "g2"}},
				Policy: policy.Spec{
					Upstreams: []string{"a", "b"},
					Rules:     []policy.Rule{{Effect: policy.Deny, Pattern: "a__secret_*"}, {Effect: policy.Allow, Pattern: "*"}},
				},
			},
		},
		{
			name:  "file alone",
			stdin: file,
			args:  []string{"--file", "-"},
			want: tenancy.Tenant{
				Name: "from-file", Anonymous: true,
				Selectors: []tenant.Selector{{Group: "g1"}},
				Policy:    policy.Spec{Upstreams: []string{"a"}, Rules: []policy.Rule{{Effect: policy.Deny, Pattern: "a__secret_*"}}},
				Limits:    tenancy.Limits{Rate: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &tenancyCLI{stderr: &bytes.Buffer{}}
			fs := c.flags("tenant put")
			var tf tenantFlags
			tf.register(fs)
			if _, err := parse(fs, tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := tf.build(fs, strings.NewReader(tt.stdin))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tenant (-want +got):\n%s", diff)
			}
		})
	}
	// A file with an unknown key is refused.
	c := &tenancyCLI{stderr: &bytes.Buffer{}}
	fs := c.flags("tenant put")
	var tf tenantFlags
	tf.register(fs)
	if _, err := parse(fs, []string{"--file", "-"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tf.build(fs, strings.NewReader("name: a\nanonymus: true\n")); err == nil || !strings.Contains(err.Error(), "anonymus") {
		t.Errorf("unknown key: %v", err)
	}
}

// eventually runs the command until ok accepts its result: a change
// reaches tenancy-svc's resolve snapshot asynchronously.
func eventually(t *testing.T, what string, run func() cliResult, ok func(cliResult) bool) cliResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := run()
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within 10s; last exit %d\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestTenancyCLIResolve(t *testing.T) {
	url := startTenancy(t)
	mustCLI(t, url, "", "tenant", "put", "--name", "acme", "--upstream", "github",
		"--allow", "tools:github__get_*", "--deny", "tools:github__*", "--default", "allow",
		"--claim", "org=acme", "--group", "shared")
	mustCLI(t, url, "", "tenant", "put", "--name", "beta", "--all-upstreams", "--group", "shared")
	key := strings.TrimSpace(mustCLI(t, url, "", "key", "create", "--tenant", "acme", "--principal", "alice").stdout)
	id, _, ok := apikey.Parse(key)
	if !ok {
		t.Fatalf("key create printed %q", key)
	}

	// resolve key: from stdin (a trailing newline is fine), then from a
	// variable; the key never appears in the output.
	r := eventually(t, "new key resolves", func() cliResult { return cli(t, url, key+"\n", "resolve", "key") },
		func(r cliResult) bool { return r.code == 0 })
	if want := "API key " + id + ": tenant acme, principal alice\n"; r.stdout != want {
		t.Errorf("resolve key: %q, want %q", r.stdout, want)
	}
	t.Setenv("SWITCHYARD_TEST_KEY", key)
	r = mustCLI(t, url, "", "resolve", "key", "--key-env", "SWITCHYARD_TEST_KEY", "--json")
	var kr tenancy.ResolveKeyReply
	if err := json.Unmarshal([]byte(r.stdout), &kr); err != nil || kr != (tenancy.ResolveKeyReply{Tenant: "acme", Principal: "alice", KeyID: id}) {
		t.Errorf("resolve key --json: %v %s", err, r.stdout)
	}
	mustCLI(t, url, "", "key", "revoke", id)
	r = eventually(t, "revocation", func() cliResult { return cli(t, url, key, "resolve", "key") },
		func(r cliResult) bool { return r.code != 0 })
	if r.code != 1 || !strings.Contains(r.stderr, "not a valid key") || !strings.Contains(r.stderr, "404") {
		t.Errorf("revoked key: exit %d stderr %q", r.code, r.stderr)
	}
	for _, out := range []string{r.stdout, r.stderr} {
		if strings.Contains(out, key) || strings.Contains(out, key[4:]) {
			t.Errorf("output %q holds the key", out)
		}
	}

	// resolve principal.
	r = mustCLI(t, url, "", "resolve", "principal", "--issuer", "https://idp", "--claim", "sub=u1", "--claim", "org=acme")
	if r.stdout != "tenant acme\n" {
		t.Errorf("resolve principal: %q", r.stdout)
	}
	r = mustCLI(t, url, "", "resolve", "principal", "--claim", "org=nope", "--claim", "org=acme", "--json")
	var pr tenancy.ResolvePrincipalReply
	if err := json.Unmarshal([]byte(r.stdout), &pr); err != nil || pr.Tenant != "acme" {
		t.Errorf("resolve principal --json: %v %s", err, r.stdout)
	}

	// resolve access: one line per outcome.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tenant", "acme", "--kind", "tools", "--upstream", "github", "--subject", "github__get_issue"}, `allowed: tenant acme sees tools "github__get_issue" of upstream github`},
		{[]string{"--tenant", "acme", "--kind", "tools", "--upstream", "github", "--subject", "github__delete_repo"}, "denied: tenant acme sees upstream github, but its rules (or default) deny"},
		{[]string{"--tenant", "acme", "--kind", "prompts", "--upstream", "gitlab", "--subject", "gitlab__p"}, "denied: tenant acme does not see upstream gitlab"},
	} {
		r := mustCLI(t, url, "", append([]string{"resolve", "access"}, tc.args...)...)
		if !strings.HasPrefix(r.stdout, tc.want) {
			t.Errorf("resolve access %q: %q, want %q", tc.args, r.stdout, tc.want)
		}
	}
	r = mustCLI(t, url, "", "resolve", "access", "--tenant", "beta", "--kind", "resources", "--upstream", "x", "--subject", "file:///a", "--json")
	var ar tenancy.ResolveAccessReply
	if err := json.Unmarshal([]byte(r.stdout), &ar); err != nil || ar != (tenancy.ResolveAccessReply{UpstreamVisible: true}) {
		t.Errorf("resolve access --json: %v %s (beta's default is deny)", err, r.stdout)
	}

	// Server-side refusals exit 1 with the code in the message.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resolve", "principal", "--group", "shared"}, "409"},
		{[]string{"resolve", "principal", "--group", "nobody"}, "404"},
		{[]string{"resolve", "access", "--tenant", "ghost", "--kind", "tools", "--upstream", "u", "--subject", "u__t"}, "404"},
		{[]string{"resolve", "access", "--tenant", "acme", "--kind", "tools", "--upstream", "Not A Slug", "--subject", "u__t"}, "400"},
	} {
		r := cli(t, url, "", tc.args...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit %d stderr %q, want 1 mentioning %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
