package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/bench/internal/busfloor"
	"github.com/switchyard-mcp/switchyard/bench/internal/launch"
	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

func TestBusCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad mode", []string{"-mode", "udp"}, "mode must be"},
		{"n 0", []string{"-n", "0"}, "need n >= 1"},
		{"negative warmup", []string{"-warmup", "-1"}, "need n >= 1"},
		{"negative gap", []string{"-gap", "-1us"}, "must not be negative"},
		{"negative gomaxprocs", []string{"-gomaxprocs", "-1"}, "must not be negative"},
		{"negative payload", []string{"-payload", "-1"}, "payload must be"},
		{"wildcard subject", []string{"-subject", "bench.*"}, "not a literal subject"},
		{"respond without nats", []string{"-respond"}, "-respond needs -nats"},
		{"respond with a measuring flag", []string{"-respond", "-nats", "nats://127.0.0.1:1", "-n", "5"}, "-n is for measuring"},
		{"nats without respond", []string{"-nats", "nats://127.0.0.1:1"}, "-nats is for -respond"},
		{"switchyard in mode inproc", []string{"-switchyard", "/bin/true"}, "-switchyard is for -mode tcp"},
		{"tcp without a switchyard binary", []string{"-mode", "tcp", "-switchyard", filepath.Join(t.TempDir(), "none")}, "switchyard binary"},
		{"extra argument", []string{"-n", "5", "x"}, "unexpected arguments"},
		{"unknown flag", []string{"-nope"}, "-nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := busMain(tc.args, &stdout, &stderr); got != 2 {
				t.Errorf("busMain(%q) = %d, want 2; stderr:\n%s", tc.args, got, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestBusCommandGOMAXPROCS: the requester gets the gateway's GOMAXPROCS
// unless $GOMAXPROCS is set, as the processes -mode tcp starts do (with
// GOMAXPROCS=2 the server and the responder ran with 2 Ps and the
// requester with 1); -gomaxprocs wins over both.
func TestBusCommandGOMAXPROCS(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		args      []string
		want      int
	}{
		{"unset", "", nil, 1},
		{"from the environment", "2", nil, 0},
		{"flag over the default", "", []string{"-gomaxprocs", "3"}, 3},
		{"flag over the environment", "2", []string{"-gomaxprocs", "1"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tc.env)
			fs, o := busFlags()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := o.config("").GOMAXPROCS; got != tc.want {
				t.Errorf("$GOMAXPROCS=%q, args %q: config GOMAXPROCS %d, want %d", tc.env, tc.args, got, tc.want)
			}
		})
	}
}

// benchFields parses the BENCH_RESULT line of out into its key=value
// fields.
func benchFields(t *testing.T, out string) map[string]string {
	t.Helper()
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "BENCH_RESULT "); ok {
			f := map[string]string{}
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			return f
		}
	}
	t.Fatalf("no BENCH_RESULT line in:\n%s", out)
	return nil
}

// resultFile reads the one file dir/pattern.
func resultFile(t *testing.T, dir, pattern string) []byte {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(m) != 1 {
		t.Fatalf("%s in %s: %v (%v), want one file", pattern, dir, m, err)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkBusOutput checks the BENCH_RESULT line and the JSON and Markdown
// files of a run of n requests in mode (bus-inproc or bus-tcp) and returns
// the decoded JSON.
func checkBusOutput(t *testing.T, stdout, dir, mode string, n, gapMicros, payload int) *busfloor.Result {
	t.Helper()
	f := benchFields(t, stdout)
	for k, want := range map[string]string{
		"mode": mode, "n": strconv.Itoa(n), "gap_us": strconv.Itoa(gapMicros), "payload": strconv.Itoa(payload),
		"gomaxprocs": "1", "errors": "0", "stamps": "true",
	} {
		if f[k] != want {
			t.Errorf("BENCH_RESULT %s=%q, want %q", k, f[k], want)
		}
	}
	for _, k := range []string{"pause_p50_us", "rtt_p50_us", "rtt_p99_us", "hop1_p50_us", "hop2_p50_us", "responder_p50_us"} {
		if v, err := strconv.ParseFloat(f[k], 64); err != nil || v < 0 {
			t.Errorf("BENCH_RESULT %s=%q, want a number of µs", k, f[k])
		}
	}

	var r busfloor.Result
	if err := json.Unmarshal(resultFile(t, dir, mode+"-*.json"), &r); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if r.Mode != mode || r.N != n || r.RTT.N != n || len(r.Samples) != n || r.RequestHop.N != n || r.ReplyHop.N != n || r.PayloadBytes != payload || r.GOMAXPROCS != 1 {
		t.Errorf("JSON: mode %q, n %d, rtt n %d, %d samples, hop ns %d/%d, payload %d, gomaxprocs %d",
			r.Mode, r.N, r.RTT.N, len(r.Samples), r.RequestHop.N, r.ReplyHop.N, r.PayloadBytes, r.GOMAXPROCS)
	}
	if r.RequestHop.P50 <= 0 || r.ReplyHop.P50 <= 0 || r.RequestHop.P50 > r.RTT.P50 || r.ReplyHop.P50 > r.RTT.P50 {
		t.Errorf("JSON: hop medians %v and %v, want positive and at most the round trip's %v", r.RequestHop.P50, r.ReplyHop.P50, r.RTT.P50)
	}
	md := string(resultFile(t, dir, mode+"-*.md"))
	for _, s := range []string{"## Bus round trip: mode=" + mode, "| round trip ", "| request hop ", "| reply hop ", "Host: "} {
		if !strings.Contains(md, s) {
			t.Errorf("Markdown lacks %q:\n%s", s, md)
		}
	}
	return &r
}

// TestBusCommandInproc runs "bench bus" (mode inproc) end to end with few
// requests and checks what it prints and writes.
func TestBusCommandInproc(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMAXPROCS", "")
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := busMain([]string{"-n", "40", "-warmup", "4", "-gap", "20us", "-payload", "256", "-out", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	r := checkBusOutput(t, stdout.String(), dir, "bus-inproc", 40, 20, 256)
	if r.NATSURL != "" || len(r.Processes) != 0 {
		t.Errorf("inproc result names a server %q or processes %+v", r.NATSURL, r.Processes)
	}
	if r.GOGC != launch.GatewayGOGC {
		t.Errorf("requester GOGC %q, want the gateway's %s when $GOGC is unset", r.GOGC, launch.GatewayGOGC)
	}
	if !strings.Contains(stdout.String(), "round trip   p50") {
		t.Errorf("stdout lacks the text report:\n%s", stdout.String())
	}
}

// TestBusCommandNoStamps: -stamps=false measures the round trip alone,
// and a GOGC from the environment is left as it is.
func TestBusCommandNoStamps(t *testing.T) {
	t.Setenv("GOGC", "150")
	t.Setenv("GOMAXPROCS", "")
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := busMain([]string{"-stamps=false", "-n", "20", "-warmup", "0", "-out", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	if f := benchFields(t, stdout.String()); f["stamps"] != "false" || f["n"] != "20" || f["hop1_p50_us"] != "0.0" {
		t.Errorf("BENCH_RESULT %v, want stamps=false n=20 hop1_p50_us=0.0", f)
	}
	var r busfloor.Result
	if err := json.Unmarshal(resultFile(t, dir, "bus-inproc-*.json"), &r); err != nil {
		t.Fatal(err)
	}
	if r.Stamps || r.RTT.N != 20 || r.RequestHop.N != 0 || r.GOGC != "150" {
		t.Errorf("JSON: stamps %v, rtt n %d, request hop n %d, GOGC %q; want false, 20, 0, 150", r.Stamps, r.RTT.N, r.RequestHop.N, r.GOGC)
	}
}

// TestBusCommandTCP runs "bench bus -mode tcp" end to end: the test binary
// plays "switchyard nats" (an embedded server, see TestMain) and is
// re-executed as the responder ("bench bus -respond"); both get the
// gateway's runtime settings and are gone when the command returns.
func TestBusCommandTCP(t *testing.T) {
	t.Setenv(helperEnv, "1")
	t.Setenv("GOGC", "")
	t.Setenv("GOMAXPROCS", "")
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"-mode", "tcp", "-switchyard", os.Args[0], "-n", "30", "-warmup", "3", "-gap", "0", "-out", dir}
	if code := busMain(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	r := checkBusOutput(t, stdout.String(), dir, "bus-tcp", 30, 0, 400)
	if !strings.HasPrefix(r.NATSURL, "nats://127.0.0.1:") {
		t.Errorf("NATS URL %q", r.NATSURL)
	}
	if len(r.Processes) != 2 || r.Processes[0].Name != "nats" || r.Processes[1].Name != "responder" {
		t.Fatalf("processes %+v, want nats and responder", r.Processes)
	}
	for _, p := range r.Processes {
		if p.GOGC != launch.GatewayGOGC || p.GOMAXPROCS != launch.GatewayGOMAXPROCS {
			t.Errorf("%s: GOGC %q, GOMAXPROCS %q, want the gateway's", p.Name, p.GOGC, p.GOMAXPROCS)
		}
		if err := syscall.Kill(p.PID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still there after the command returned: kill 0 = %v", p.Name, p.PID, err)
		}
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(r.NATSURL, "nats://"), time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after the command returned", r.NATSURL)
	}
}

// announceWriter signals the first complete line written to it.
type announceWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	ready chan struct{}
}

func (w *announceWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), "\n")
	w.buf.Write(b)
	if !had && strings.Contains(w.buf.String(), "\n") {
		close(w.ready)
	}
	return len(b), nil
}

func (w *announceWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestBusResponderCommand runs the responder of "bench bus -respond"
// against a server on a random loopback port: it announces itself once
// subscribed, echoes with stamps, and unsubscribes when its ctx ends.
func TestBusResponderCommand(t *testing.T) {
	ns := natstest.Start(t)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := &announceWriter{ready: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- serveResponder(ctx, ns.ClientURL(), "test.responder", w) }()
	select {
	case <-w.ready:
	case err := <-done:
		t.Fatalf("serveResponder = %v before announcing", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no announcement within 30s")
	}
	if got := w.String(); got != launch.BusResponderReady+"test.responder\n" {
		t.Errorf("announcement %q", got)
	}

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hdr := nats.Header{hop.Header: []string{"1"}}
	hop.Set(hdr, hop.EdgePub)
	rep, err := nc.RequestMsg(&nats.Msg{Subject: "test.responder", Data: []byte("ping"), Header: hdr}, 5*time.Second)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	st := hop.Stamps(rep.Header)
	if string(rep.Data) != "ping" || st[hop.WorkerIn] < st[hop.EdgePub] || st[hop.WorkerOut] < st[hop.WorkerIn] {
		t.Errorf("reply %q with headers %v, want ping and edge_pub <= worker_in <= worker_out", rep.Data, rep.Header)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveResponder = %v after cancel, want nil", err)
	}
	if _, err := nc.Request("test.responder", []byte("ping"), 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("request after the responder stopped = %v, want no responders", err)
	}
}
