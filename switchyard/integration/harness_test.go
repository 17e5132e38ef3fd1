package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/metrics"
	"github.com/switchyard-mcp/switchyard/internal/trace"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/switchyard/internal/roles"
	"github.com/switchyard-mcp/switchyard/testutil/bins"
	"github.com/switchyard-mcp/switchyard/testutil/natsauthtest"
)

const (
	v2025 = "2025-11-25"
	v2026 = "2026-07-28"
)

// eventually polls f until it returns nil or the deadline passes.
func eventually(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("condition not met within %s: %v", d, err)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a child process whose output goes to the test log.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProc(t *testing.T, name string, argv ...string) *proc {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if testing.Verbose() {
				t.Logf("[%s] %s", name, sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

// kill sends SIGKILL and waits for the process to exit: a crash.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop sends SIGTERM, so that the process shuts down as in production (a
// `switchyard dev` or `switchyard nats` removes its temporary store, which
// SIGKILL left behind in /tmp at every run), and kills it if it has not
// exited within 10 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// waitReady waits until the /readyz of the listener at addr answers 200.
func waitReady(t *testing.T, addr string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		code, body, err := readyz(addr)
		if err != nil {
			return err
		}
		if code != 200 {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
}

// waitHTTP waits until addr accepts TCP connections.
func waitTCP(t *testing.T, addr string) {
	t.Helper()
	eventually(t, 15*time.Second, func() error {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// startEverythingHTTP runs the go-sdk conformance server over streamable
// HTTP (stateful) and returns its URL.
func startEverythingHTTP(t *testing.T) (string, *proc) {
	addr := freeAddr(t)
	p := startProc(t, "everything-http", bins.Everything(t), "-http", addr, "-stateless=false")
	waitTCP(t, addr)
	return "http://" + addr + "/", p
}

func benchBin(t *testing.T) string {
	return bins.Build(t, "bench", "github.com/switchyard-mcp/switchyard/bench/cmd/bench")
}

// startFixtureHTTP runs the bench fixture upstream over streamable HTTP.
func startFixtureHTTP(t *testing.T, extra ...string) (string, *proc) {
	addr := freeAddr(t)
	p := startProc(t, "fixture", append([]string{benchBin(t), "fixture", "-http", addr}, extra...)...)
	waitTCP(t, addr)
	return "http://" + addr + "/mcp", p
}

// gateway is Switchyard running in this process on an embedded NATS server.
type gateway struct {
	url  string
	ns   *natsauthtest.Server
	set  *roles.Set
	stop context.CancelFunc
	done chan error
}

// connect returns an in-process connection to the gateway's NATS server
// as identity id (a test that watches or writes the bus takes the
// identity whose permissions allow it), closed by t.Cleanup.
func (g *gateway) connect(t testing.TB, id proto.Identity) *nats.Conn {
	t.Helper()
	return g.ns.Connect(t, id)
}

// credsFile writes identity id's credentials into a file of the test's
// and returns its path (for a CLI run as another process).
func (g *gateway) credsFile(t testing.TB, id proto.Identity) string {
	t.Helper()
	b, err := g.ns.Material.Users[id].Creds()
	if err != nil {
		t.Fatal(err)
	}
	p := t.TempDir() + "/" + string(id) + ".creds"
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startGateway runs every role in this process on an embedded NATS
// server with authentication on: each role connects as its own identity
// with the permission table's permissions, and the test fails at cleanup
// if any connection saw a permission violation. topts are added to each
// role's trace Provider (tests pass trace.WithSpanProcessor to record
// spans).
func startGateway(t testing.TB, cfg *config.File, topts ...trace.Option) *gateway {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ns := natsauthtest.Start(t, proto.AccessParams{AuditStream: cfg.Audit.StreamName()})
	set, err := roles.BuildWith(roles.Order, cfg, func(role string) (*nats.Conn, error) {
		return nats.Connect("", ns.Options(proto.Identity(role))...)
	}, nil, metrics.NewRegistry(), topts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	g := &gateway{ns: ns, set: set, stop: cancel, done: make(chan error, 1)}
	go func() { g.done <- set.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-g.done:
			if err != nil {
				t.Errorf("gateway: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("gateway did not stop within 20s of cancel")
		}
		set.Close()
	})
	eventually(t, 20*time.Second, func() error {
		if !set.Ready() {
			return errors.New("roles not ready")
		}
		return nil
	})
	g.url = "http://" + set.Roles["edge"].(interface{ Addr() string }).Addr()
	return g
}

// loadConfig builds a config from YAML text (defaults filled, validated).
func loadConfig(t testing.TB, yaml string) *config.File {
	t.Helper()
	f := &config.File{}
	if err := config.Parse([]byte(yaml), f); err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/c.yaml"
	if err := writeFile(path, yaml); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// connect opens an official-SDK client session at the given protocol version.
func connect(t *testing.T, endpoint, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "switchyard-test", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}
	cs, err := c.Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s at %s: %v", endpoint, version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// listAll pages through tools/list and returns the names in order.
func listAll(ctx context.Context, cs *mcp.ClientSession) ([]string, int, error) {
	var names []string
	pages := 0
	var cursor string
	for {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, pages, err
		}
		pages++
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if res.NextCursor == "" {
			return names, pages, nil
		}
		cursor = res.NextCursor
	}
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func hasAll(have []string, want ...string) error {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return fmt.Errorf("%q missing from %d tools", w, len(have))
		}
	}
	return nil
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

// startEverythingGateway runs the go-sdk everything-server over HTTP and a
// gateway in front of it as ev-http and, over stdio, as ev-stdio; it
// returns the server's own URL and the gateway.
func startEverythingGateway(t *testing.T) (string, *gateway) {
	t.Helper()
	evURL, _ := startEverythingHTTP(t)
	cfg := loadConfig(t, fmt.Sprintf(`
call_timeout: 30s
upstreams:
  - name: ev-http
    url: %s
  - name: ev-stdio
    command: [%q]
`, evURL, bins.Everything(t)))
	return evURL, startGateway(t, cfg)
}
