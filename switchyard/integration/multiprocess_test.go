package integration

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// TestIntegrationMultiProcess runs every role as its own process over TCP
// NATS, authenticated and over TLS with the material of switchyard nats
// init (as the README's multi-process block), with two workers for the
// same upstreams; killing one worker leaves calls succeeding on the other.
func TestIntegrationMultiProcess(t *testing.T) {
	sy := bins.Build(t, "switchyard", "github.com/switchyard-mcp/switchyard/switchyard/cmd/switchyard")
	evURL, _ := startEverythingHTTP(t)
	fxURL, _ := startFixtureHTTP(t)
	natsAddr, edgeAddr := freeAddr(t), freeAddr(t)
	auth := initAuth(t, sy)
	natsURL := "tls://" + natsAddr
	cfgPath := t.TempDir() + "/switchyard.yaml"
	if err := writeFile(cfgPath, fmt.Sprintf(`
listen: %s
nats: %s
page_size: 1
call_timeout: 30s
worker:
  heartbeat_interval: 200ms
upstreams:
  - name: ev-http
    url: %s
  - name: ev-stdio
    command: [%q]
  - name: fixture
    url: %s
`, edgeAddr, natsURL, evURL, bins.Everything(t), fxURL)); err != nil {
		t.Fatal(err)
	}
	startProc(t, "nats", sy, "nats", "--auth", auth, "--addr", natsAddr, "--store", t.TempDir())
	waitTCP(t, natsAddr)
	// As the README's multi-process block: each role takes its own
	// identity's creds from the directory, over TLS.
	common := []string{"--config", cfgPath, "--log-format", "text", "--nats-creds", auth, "--nats-ca", filepath.Join(auth, natsauth.FileCA)}
	for _, role := range []string{"tenancy-svc", "router", "edge"} {
		startProc(t, role, append([]string{sy, role}, common...)...)
	}
	w1 := startProc(t, "worker-1", append([]string{sy, "upstream-worker", "--id", "worker-1"}, common...)...)
	startProc(t, "worker-2", append([]string{sy, "upstream-worker", "--id", "worker-2"}, common...)...)
	waitReady(t, edgeAddr)

	// Observe which worker serves each call (routed on its worker
	// subject, granted on its grant subject), as a NATS subscriber with
	// the worker identity: the only one that may.
	nc := connectAs(t, natsURL, auth, proto.IdentityWorker)
	var served [2]atomic.Int64
	var observers [2][]*nats.Subscription
	for i, w := range []string{"worker-1", "worker-2"} {
		routed, _ := proto.AppendWorkerSubject(nil, w, proto.OpToolsCall)
		granted, _ := proto.AppendGrantSubject(nil, w, proto.OpToolsCall)
		for _, subj := range []string{string(routed), string(granted)} {
			sub, err := nc.Subscribe(subj, func(*nats.Msg) { served[i].Add(1) })
			if err != nil {
				t.Fatal(err)
			}
			observers[i] = append(observers[i], sub)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	url := "http://" + edgeAddr + "/mcp"
	probe := connect(t, url, v2025, nil)
	eventually(t, 30*time.Second, func() error {
		names, _, err := listAll(t.Context(), probe)
		if err != nil {
			return err
		}
		return hasAll(names, "ev-http__test_simple_text", "ev-stdio__test_simple_text", "fixture__echo", "fixture__big")
	})

	// Several 2025-era sessions (each pinned to one worker) and a stateless
	// 2026-era client spread the load over both workers.
	var sessions []*mcp.ClientSession
	for range 8 {
		sessions = append(sessions, connect(t, url, v2025, nil))
	}
	sessions = append(sessions, connect(t, url, v2026, nil))
	call := func(cs *mcp.ClientSession, tool string) error {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("%s: isError: %s", tool, text(res))
		}
		return nil
	}
	for _, cs := range sessions {
		for _, tool := range []string{"fixture__echo", "ev-http__test_simple_text", "ev-stdio__test_simple_text"} {
			if err := call(cs, tool); err != nil {
				t.Fatal(err)
			}
		}
	}
	if served[0].Load() == 0 || served[1].Load() == 0 {
		t.Fatalf("load not shared: worker-1 served %d, worker-2 %d", served[0].Load(), served[1].Load())
	}

	t.Run("unknown tool and 8 MiB", func(t *testing.T) {
		_, err := probe.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__nope"})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("unknown tool: %v", err)
		}
		res, err := probe.CallTool(t.Context(), &mcp.CallToolParams{Name: "fixture__big", Arguments: map[string]any{"bytes": 8 << 20}})
		if err != nil || len(text(res)) != 8<<20 {
			t.Fatalf("8 MiB: %v", err)
		}
	})

	t.Run("kill a worker", func(t *testing.T) {
		// The observer is interest in worker-1's subject: without it, NATS
		// reports no responders for calls still sent there.
		for _, sub := range observers[0] {
			if err := sub.Unsubscribe(); err != nil {
				t.Fatal(err)
			}
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		w1.kill()
		before := served[1].Load()
		for round := range 3 {
			for i, cs := range sessions {
				for _, tool := range []string{"fixture__echo", "ev-stdio__test_simple_text"} {
					if err := call(cs, tool); err != nil {
						t.Fatalf("round %d session %d %s after killing worker-1: %v", round, i, tool, err)
					}
				}
			}
		}
		if served[1].Load() == before {
			t.Fatal("worker-2 served nothing after worker-1 died")
		}
	})
}

// initAuth runs switchyard nats init into a directory of the test's and
// returns it.
func initAuth(t *testing.T, sy string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nats-auth")
	if out, err := exec.Command(sy, "nats", "init", dir).CombinedOutput(); err != nil {
		t.Fatalf("switchyard nats init: %v\n%s", err, out)
	}
	return dir
}

// connectAs connects to url as identity id with the creds and CA of the
// auth directory dir, closed by t.Cleanup; permission violations fail
// the test.
func connectAs(t *testing.T, url, dir string, id proto.Identity) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserCredentials(filepath.Join(dir, natsauth.CredsFile(id))),
		nats.RootCAs(filepath.Join(dir, natsauth.FileCA)), nats.CustomInboxPrefix(id.InboxPrefix()),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			t.Errorf("%s: %v", id, err)
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", id, err)
	}
	t.Cleanup(nc.Close)
	return nc
}
