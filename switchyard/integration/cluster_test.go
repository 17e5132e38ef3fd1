package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// TestIntegrationNATSCluster: three `switchyard nats --cluster` nodes form
// a cluster over routes secured by the auth directory (TLS, route secret);
// every role runs as its own process with the three URLs; tenancy-svc
// creates the buckets and the audit stream with three replicas; a node killed (SIGKILL) leaves
// the gateway serving; a node with another directory's secret never joins.
func TestIntegrationNATSCluster(t *testing.T) {
	sy := bins.Build(t, "switchyard", "github.com/switchyard-mcp/switchyard/switchyard/cmd/switchyard")
	fxURL, _ := startFixtureHTTP(t)
	auth := initAuth(t, sy)
	var clients, routes []string
	for range 3 {
		clients, routes = append(clients, freeAddr(t)), append(routes, freeAddr(t))
	}
	nodes := make([]*proc, 3)
	for i := range 3 {
		nodes[i] = startProc(t, fmt.Sprintf("nats-%d", i), sy, "nats", "--auth", auth, "--addr", clients[i], "--store", t.TempDir(),
			"--name", fmt.Sprintf("n%d", i), "--cluster", routes[i], "--routes", strings.Join(routes, ","))
	}
	for _, a := range clients {
		waitTCP(t, a)
	}
	var urls []string
	for _, a := range clients {
		urls = append(urls, "tls://"+a)
	}
	natsURL := strings.Join(urls, ",")

	// The cluster forms: JetStream answers once its meta leader is
	// elected.
	admin := connectAs(t, natsURL, auth, proto.IdentityAdmin)
	js, _ := jetstream.New(admin)
	eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err
	})

	edgeAddr := freeAddr(t)
	cfgPath := t.TempDir() + "/switchyard.yaml"
	if err := writeFile(cfgPath, fmt.Sprintf("listen: %s\nnats: %s\ncall_timeout: 30s\nworker:\n  heartbeat_interval: 200ms\nupstreams:\n  - name: fixture\n    url: %s\n",
		edgeAddr, natsURL, fxURL)); err != nil {
		t.Fatal(err)
	}
	common := []string{"--config", cfgPath, "--log-format", "text", "--nats-creds", auth, "--nats-ca", filepath.Join(auth, natsauth.FileCA)}
	for _, role := range []string{"tenancy-svc", "router", "upstream-worker", "edge"} {
		startProc(t, role, append([]string{sy, role}, common...)...)
	}
	waitReady(t, edgeAddr)
	for _, b := range proto.Buckets {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		st, err := js.Stream(ctx, proto.KVStream(b))
		cancel()
		if err != nil {
			t.Fatalf("bucket %s: %v", b, err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Fatalf("bucket %s has %d replicas, want 3", b, r)
		}
	}
	// The audit stream too (audit.replicas: automatic).
	eventually(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, "SWITCHYARD_AUDIT")
		if err != nil {
			return err
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			return fmt.Errorf("the audit stream has %d replicas, want 3", r)
		}
		return nil
	})

	url := "http://" + edgeAddr + "/mcp"
	c := mcp.NewClient(&mcp.Implementation{Name: "cluster", Version: "1"}, nil)
	callOnce := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: v2025})
		if err != nil {
			return err
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fixture__echo", Arguments: map[string]any{"text": "x"}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("isError: %s", text(res))
		}
		return nil
	}
	eventually(t, 30*time.Second, callOnce)

	// A node dies; the others keep the buckets and the gateway serves on.
	nodes[0].kill()
	eventually(t, 30*time.Second, callOnce)
	for range 5 {
		if err := callOnce(); err != nil {
			t.Fatalf("with a node gone: %v", err)
		}
	}

	// A node made with another directory (another route secret) is
	// refused by the cluster's routes.
	other := initAuth(t, sy)
	intruderRoute := freeAddr(t)
	cmd := exec.Command(sy, "nats", "--auth", other, "--addr", freeAddr(t), "--store", t.TempDir(), "--name", "intruder",
		"--cluster", intruderRoute, "--routes", routes[1])
	out := &strings.Builder{}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if strings.Contains(out.String(), "Route connection created") || !strings.Contains(out.String(), "TLS route handshake error") {
		t.Fatalf("an intruder node formed a route, or was not refused by TLS:\n%s", out.String())
	}
}
