package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// attacker is a connection of one identity, made as a plain NATS client
// would: the creds and CA of the auth directory, nothing else. It
// collects the permission violations the server reports.
type attacker struct {
	id proto.Identity
	nc *nats.Conn
	js jetstream.JetStream

	mu         sync.Mutex
	violations []string
}

func newAttacker(t *testing.T, url, dir string, id proto.Identity) *attacker {
	t.Helper()
	a := &attacker{id: id}
	nc, err := nats.Connect(url, nats.UserCredentials(filepath.Join(dir, natsauth.CredsFile(id))),
		nats.RootCAs(filepath.Join(dir, natsauth.FileCA)), nats.CustomInboxPrefix(id.InboxPrefix()),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				a.mu.Lock()
				a.violations = append(a.violations, err.Error())
				a.mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", id, err)
	}
	t.Cleanup(nc.Close)
	a.nc = nc
	a.js, _ = jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	return a
}

// refused waits until the server has reported a permission violation
// naming subject.
func (a *attacker) refused(t *testing.T, subject string) {
	t.Helper()
	_ = a.nc.Flush()
	eventually(t, 5*time.Second, func() error {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, v := range a.violations {
			if strings.Contains(v, `"`+subject+`"`) {
				return nil
			}
		}
		return fmt.Errorf("%s: no permission violation for %s (seen %q)", a.id, subject, a.violations)
	})
}

// TestIntegrationSecurity runs every role as its own process with the
// material of switchyard nats init over TLS, as docs/security.md says to,
// and checks that the real traffic works while the attacks of the threat
// model fail with their real effects: no credential, another deployment's
// CA, a catalog entry that would make workers run a command, a minted API
// key, a fake worker, a direct call of a tool the tenant's policy denies,
// a forged goodbye, reading every subject, purging or reading the audit
// trail; and that a rotated credential is refused while the rotated role
// carries on with its new one.
func TestIntegrationSecurity(t *testing.T) {
	sy := bins.Build(t, "switchyard", "github.com/switchyard-mcp/switchyard/switchyard/cmd/switchyard")
	fxURL, _ := startFixtureHTTP(t)
	auth := initAuth(t, sy)
	natsAddr, edgeAddr := freeAddr(t), freeAddr(t)
	natsURL := "tls://" + natsAddr
	key := mintKey(t)
	t.Setenv("SY_TEST_SECURITY_KEY", key)
	marker := filepath.Join(t.TempDir(), "pwned")
	cfgPath := filepath.Join(t.TempDir(), "switchyard.yaml")
	if err := writeFile(cfgPath, fmt.Sprintf(`
listen: %s
nats:
  url: %s
  creds: %s
  ca: %s
call_timeout: 20s
upstreams:
  - name: fixture
    url: %s
tenants:
  - name: acme
    policy:
      upstreams: [fixture]
      default: allow
      rules:
        - {effect: deny, kind: tools, pattern: "fixture__fail"}
api_keys:
  - {tenant: acme, principal: alice, key_env: SY_TEST_SECURITY_KEY}
`, edgeAddr, natsURL, auth, filepath.Join(auth, natsauth.FileCA), fxURL)); err != nil {
		t.Fatal(err)
	}
	startProc(t, "nats", sy, "nats", "--auth", auth, "--addr", natsAddr, "--store", t.TempDir())
	waitTCP(t, natsAddr)
	common := []string{"--config", cfgPath, "--log-format", "text"}
	for _, role := range []string{"tenancy-svc", "router", "edge"} {
		startProc(t, role, append([]string{sy, role}, common...)...)
	}
	startProc(t, "worker-1", append([]string{sy, "upstream-worker", "--id", "worker-1"}, common...)...)
	waitReady(t, edgeAddr)
	mcpURL := "http://" + edgeAddr + "/mcp"
	echo := func(cs *mcp.ClientSession) error {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "genuine"}})
		if err != nil {
			return err
		}
		if text(res) != "genuine" {
			return fmt.Errorf("echo answered %q", text(res))
		}
		return nil
	}
	sessions := []*mcp.ClientSession{connectKey(t, mcpURL, v2025, key, nil), connectKey(t, mcpURL, v2026, key, nil)}
	eventually(t, 20*time.Second, func() error { return echo(sessions[0]) })
	for _, cs := range sessions {
		for range 5 { // routed, then granted
			if err := echo(cs); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := sessions[0].CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__fail"}); err == nil {
		t.Fatal("the policy's denied tool was called through the edge")
	}

	t.Run("no credential or no trust is refused", func(t *testing.T) {
		ca := nats.RootCAs(filepath.Join(auth, natsauth.FileCA))
		if nc, err := nats.Connect(natsURL, ca, nats.Timeout(5*time.Second)); err == nil {
			nc.Close()
			t.Fatal("a client without credentials was accepted")
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("without credentials: %v, want an authorization violation", err)
		}
		other := initAuth(t, sy)
		if nc, err := nats.Connect(natsURL, ca, nats.UserCredentials(filepath.Join(other, "admin.creds")), nats.Timeout(5*time.Second)); err == nil {
			nc.Close()
			t.Fatal("another deployment's admin credentials were accepted")
		}
		// The server's certificate is checked: a client trusting another
		// CA does not connect (nor send its credentials).
		if nc, err := nats.Connect(natsURL, nats.RootCAs(filepath.Join(other, natsauth.FileCA)),
			nats.UserCredentials(filepath.Join(auth, "admin.creds")), nats.Timeout(5*time.Second)); err == nil {
			nc.Close()
			t.Fatal("a client trusting another CA connected")
		}
		if nc, err := nats.Connect("nats://"+natsAddr, nats.UserCredentials(filepath.Join(auth, "admin.creds")), nats.Timeout(5*time.Second)); err == nil {
			nc.Close()
			t.Fatal("a client connected without TLS")
		}
	})

	tenancy := newAttacker(t, natsURL, auth, proto.IdentityTenancy) // the owner: to read what the others tried
	catalog, err := tenancy.js.KeyValue(t.Context(), proto.BucketUpstreams)
	if err != nil {
		t.Fatal(err)
	}
	evil, _ := proto.Marshal(&proto.UpstreamSpec{Name: "evil", Transport: proto.TransportStdio, Command: []string{"touch", marker}})
	for _, id := range []proto.Identity{proto.IdentityEdge, proto.IdentityRouter, proto.IdentityWorker, proto.IdentityAudit, proto.IdentityBench, proto.IdentityAdmin} {
		t.Run("as "+string(id), func(t *testing.T) {
			a := newAttacker(t, natsURL, auth, id)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()

			// A stdio upstream in the catalog would run its command on
			// every worker.
			if _, err := a.js.Publish(ctx, "$KV."+proto.BucketUpstreams+".evil", evil); err == nil {
				t.Fatal("a catalog entry was written")
			}
			a.refused(t, "$KV."+proto.BucketUpstreams+".evil")
			// A minted API key and tenant.
			if _, err := a.js.Publish(ctx, "$KV."+proto.BucketAPIKeys+".minted", []byte("x")); err == nil {
				t.Fatal("an API key was written")
			}
			if _, err := a.js.Publish(ctx, "$KV."+proto.BucketTenants+".minted", []byte("x")); err == nil {
				t.Fatal("a tenant was written")
			}
			// Every subject, every inbox.
			for _, s := range []string{">", "_INBOX.>", proto.Prefix + ">"} {
				if _, err := a.nc.SubscribeSync(s); err != nil {
					t.Fatal(err)
				}
				a.refused(t, s)
			}
			// The audit trail: purge and update are the admin's; reading
			// is the admin's and the audit identity's.
			if id != proto.IdentityAdmin {
				if err := a.nc.Publish("$JS.API.STREAM.PURGE."+proto.DefaultAuditStream, nil); err != nil {
					t.Fatal(err)
				}
				a.refused(t, "$JS.API.STREAM.PURGE."+proto.DefaultAuditStream)
			}
			ictx, icancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer icancel()
			if _, err := a.js.Stream(ictx, proto.DefaultAuditStream); (err == nil) != (id == proto.IdentityAdmin || id == proto.IdentityAudit) {
				t.Errorf("audit stream info (its per-subject counts show every tenant's activity): %v", err)
			}
			if id == proto.IdentityWorker {
				return // workers may take calls and send heartbeats: their own
			}
			// A fake worker in the pool or on a worker's subject, and a
			// forged goodbye.
			for _, s := range []string{proto.Prefix + "pool.fixture.tools_call", proto.Prefix + "worker.worker-1.tools_call", proto.Prefix + "grant.worker-1.tools_call"} {
				if _, err := a.nc.QueueSubscribe(s, "q", func(*nats.Msg) {}); err != nil {
					t.Fatal(err)
				}
				a.refused(t, s)
			}
			bye, _ := proto.Marshal(&proto.Heartbeat{Worker: "worker-1", Bye: true})
			if err := a.nc.Publish(proto.Prefix+"evt.worker.worker-1", bye); err != nil {
				t.Fatal(err)
			}
			a.refused(t, proto.Prefix+"evt.worker.worker-1")
			// A direct call of the tool acme's policy denies.
			if id != proto.IdentityRouter {
				req, _ := proto.Marshal(&proto.Request{Method: "tools/call", Tenant: "acme", Upstream: "fixture", Name: "fail",
					Params: []byte(`{"name":"fixture__fail","arguments":{}}`)})
				if err := a.nc.Publish(proto.Prefix+"pool.fixture.tools_call", req); err != nil {
					t.Fatal(err)
				}
				a.refused(t, proto.Prefix+"pool.fixture.tools_call")
			}
		})
	}

	t.Run("a JetStream consumer publishes nothing", func(t *testing.T) {
		// An edge may write its liveness bucket and create consumers on
		// it; a push consumer delivers stored messages to any subject it
		// names, unchecked by the permissions. The endpoints that
		// subscribe there drop what was not published to them.
		a := newAttacker(t, natsURL, auth, proto.IdentityEdge)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		body := `{"tenant":{"name":"open","anonymous":true,"policy":{"all_upstreams":true,"default":"allow"}}}`
		if _, err := a.js.Publish(ctx, "$KV."+proto.BucketEdges+".x1", []byte(body)); err != nil {
			t.Fatal(err)
		}
		for _, deliver := range []struct{ subject, group string }{
			{proto.SubjTenancyAdmin + ".tenant.put", proto.ServiceTenancy}, // the endpoint's queue group
			{proto.SubjEvtRoutes, ""},
		} {
			req := fmt.Sprintf(`{"stream_name":"KV_%s","config":{"deliver_subject":%q,"deliver_group":%q,"filter_subject":"$KV.%s.x1","deliver_policy":"last_per_subject","ack_policy":"none"}}`,
				proto.BucketEdges, deliver.subject, deliver.group, proto.BucketEdges)
			msg, err := a.nc.Request("$JS.API.CONSUMER.CREATE.KV_"+proto.BucketEdges, []byte(req), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var created struct {
				Name  string `json:"name"`
				Error any    `json:"error"`
			}
			if err := json.Unmarshal(msg.Data, &created); err != nil || created.Name == "" {
				t.Fatalf("consumer create: %s", msg.Data)
			}
			// JetStream did deliver it (there is interest on the subject).
			eventually(t, 5*time.Second, func() error {
				msg, err := a.nc.Request("$JS.API.CONSUMER.INFO.KV_"+proto.BucketEdges+"."+created.Name, nil, 2*time.Second)
				if err != nil {
					return err
				}
				var info struct {
					Delivered struct {
						Consumer uint64 `json:"consumer_seq"`
					} `json:"delivered"`
				}
				if json.Unmarshal(msg.Data, &info) != nil || info.Delivered.Consumer == 0 {
					return fmt.Errorf("not delivered yet: %s", msg.Data)
				}
				return nil
			})
		}
		tenants, err := tenancy.js.KeyValue(t.Context(), proto.BucketTenants)
		if err != nil {
			t.Fatal(err)
		}
		// What tenancy-svc would have stored stays absent.
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
			if _, err := tenants.Get(t.Context(), "open"); !errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Fatalf("the consumer's delivery stored a tenant: %v", err)
			}
			select {
			case <-t.Context().Done():
				t.Fatal(t.Context().Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		if _, err := dialKey(t.Context(), mcpURL, v2026, "", nil); err == nil {
			t.Fatal("an anonymous client connected")
		}
	})

	t.Run("an edge's direct call needs a router's grant", func(t *testing.T) {
		a := newAttacker(t, natsURL, auth, proto.IdentityEdge)
		for _, tok := range [][]byte{nil, make([]byte, 24)} {
			req, _ := proto.Marshal(&proto.Request{Method: "tools/call", Tenant: "acme", Upstream: "fixture", Name: "fail",
				Params: []byte(`{"name":"fixture__fail","arguments":{}}`), Grant: tok})
			subj, _ := proto.AppendGrantSubject(nil, "worker-1", proto.OpToolsCall)
			msg, err := a.nc.Request(string(subj), req, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var r proto.Reply
			if err := proto.Unmarshal(msg.Data, &r); err != nil || r.Error == nil || r.Error.Code != proto.CodeNotDelivered {
				t.Fatalf("granted call of a denied tool with token %x: %+v %v", tok, r.Error, err)
			}
		}
	})

	// Nothing the attackers tried took effect: the catalog and the keys
	// are as the config says, no worker ran the catalog's command, the
	// real worker still answers every call.
	if _, err := catalog.Get(t.Context(), "evil"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("catalog entry evil: %v", err)
	}
	keys, _ := tenancy.js.KeyValue(t.Context(), proto.BucketAPIKeys)
	if _, err := keys.Get(t.Context(), "minted"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("minted key: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a worker ran the injected command")
	}
	for _, cs := range sessions {
		for range 10 {
			if err := echo(cs); err != nil {
				t.Fatalf("after the attacks: %v", err)
			}
		}
	}

	t.Run("the audit identity reads the trail", func(t *testing.T) {
		out, err := exec.CommandContext(t.Context(), sy, "audit", "search", "--nats", natsURL,
			"--creds", filepath.Join(auth, natsauth.CredsFile(proto.IdentityAudit)),
			"--nats-ca", filepath.Join(auth, natsauth.FileCA), "--tenant", "acme", "--tool", "echo", "--json").CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"principal": "alice"`) {
			t.Fatalf("audit search as audit: %v\n%s", err, out)
		}
		out, err = exec.CommandContext(t.Context(), sy, "audit", "search", "--nats", natsURL,
			"--creds", filepath.Join(auth, natsauth.CredsFile(proto.IdentityEdge)),
			"--nats-ca", filepath.Join(auth, natsauth.FileCA), "--timeout", "3s").CombinedOutput()
		if err == nil {
			t.Fatalf("audit search with the edge's creds: %s", out)
		}
	})

	t.Run("rotation revokes the old credential", func(t *testing.T) {
		old, err := os.ReadFile(filepath.Join(auth, natsauth.CredsFile(proto.IdentityEdge)))
		if err != nil {
			t.Fatal(err)
		}
		oldPath := filepath.Join(t.TempDir(), "old-edge.creds")
		if err := os.WriteFile(oldPath, old, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(sy, "nats", "rotate", auth, "edge").CombinedOutput(); err != nil {
			t.Fatalf("rotate: %v\n%s", err, out)
		}
		ca := nats.RootCAs(filepath.Join(auth, natsauth.FileCA))
		eventually(t, 15*time.Second, func() error {
			nc, err := nats.Connect(natsURL, ca, nats.UserCredentials(oldPath), nats.Timeout(2*time.Second))
			if err == nil {
				nc.Close()
				return errors.New("the old edge credentials are still accepted")
			}
			return nil
		})
		// The edge process was disconnected, read its rotated creds file
		// and serves again.
		eventually(t, 30*time.Second, func() error {
			cs, err := dialKey(t.Context(), mcpURL, v2026, key, nil)
			if err != nil {
				return err
			}
			defer cs.Close()
			return echo(cs)
		})
	})

	t.Run("no authentication off loopback unless insecure", func(t *testing.T) {
		out, err := exec.Command(sy, "nats", "--addr", "0.0.0.0:"+strings.Split(freeAddr(t), ":")[1], "--store", t.TempDir()).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "without authentication") {
			t.Fatalf("switchyard nats on 0.0.0.0 without --auth: %v\n%s", err, out)
		}
	})
}

// TestIntegrationNATSClientCerts: with --tls-verify, a client needs a
// certificate the deployment's CA signed on top of its credentials.
func TestIntegrationNATSClientCerts(t *testing.T) {
	sy := bins.Build(t, "switchyard", "github.com/switchyard-mcp/switchyard/switchyard/cmd/switchyard")
	dir := filepath.Join(t.TempDir(), "nats-auth")
	if out, err := exec.Command(sy, "nats", "init", dir, "--client-certs").CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	startProc(t, "nats", sy, "nats", "--auth", dir, "--tls-verify", "--addr", addr, "--store", t.TempDir())
	waitTCP(t, addr)
	url := "tls://" + addr
	creds := nats.UserCredentials(filepath.Join(dir, natsauth.CredsFile(proto.IdentityAdmin)))
	ca := nats.RootCAs(filepath.Join(dir, natsauth.FileCA))
	if nc, err := nats.Connect(url, creds, ca, nats.Timeout(5*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a client without a certificate connected")
	}
	cert, key := natsauth.ClientCertFiles(proto.IdentityAdmin)
	nc, err := nats.Connect(url, creds, ca, nats.ClientCert(filepath.Join(dir, cert), filepath.Join(dir, key)), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("with the identity's client certificate: %v", err)
	}
	nc.Close()
	// A certificate alone is not a credential.
	if nc, err := nats.Connect(url, ca, nats.ClientCert(filepath.Join(dir, cert), filepath.Join(dir, key)), nats.Timeout(5*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a client certificate without credentials connected")
	}
}
