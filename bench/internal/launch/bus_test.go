package launch

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestLaunchBusNATS starts "switchyard nats" (the test binary's stand-in,
// which logs its argv and runtime settings) as "bench bus -mode tcp" does:
// a free loopback port, a fresh store, the gateway's GOGC and GOMAXPROCS;
// Stop ends it and removes the store.
func TestLaunchBusNATS(t *testing.T) {
	t.Setenv(helperEnv, "switchyard")
	t.Setenv("GOGC", "")
	t.Setenv("GOMAXPROCS", "")
	n, err := StartNATS(t.Context(), os.Args[0])
	if err != nil {
		t.Fatalf("StartNATS: %v", err)
	}
	defer func() { _ = n.Stop() }()
	addr, ok := strings.CutPrefix(n.URL, "nats://127.0.0.1:")
	if !ok || addr == "" {
		t.Errorf("URL = %q, want nats://127.0.0.1:<port>", n.URL)
	}
	if n.Runtime != (Runtime{GatewayGOGC, GatewayGOMAXPROCS}) {
		t.Errorf("Runtime = %+v, want the gateway's", n.Runtime)
	}
	first, _, _ := strings.Cut(n.Output(), "\n")
	var got logLine
	if err := json.Unmarshal([]byte(first), &got); err != nil {
		t.Fatalf("first output line %q: %v", first, err)
	}
	if want := []string{"nats", "--addr", strings.TrimPrefix(n.URL, "nats://"), "--store", n.store}; !slices.Equal(got.Argv, want) {
		t.Errorf("argv %q, want %q", got.Argv, want)
	}
	if got.GOGC != GatewayGOGC || got.GOMAXPROCS != GatewayGOMAXPROCS {
		t.Errorf("the process has GOGC %q, GOMAXPROCS %q, want the gateway's", got.GOGC, got.GOMAXPROCS)
	}
	if fi, err := os.Stat(n.store); err != nil || !fi.IsDir() {
		t.Errorf("store %q: %v", n.store, err)
	}
	if err := n.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	select {
	case <-n.Exited():
	default:
		t.Error("nats still running after Stop")
	}
	if _, err := os.Stat(n.store); !os.IsNotExist(err) {
		t.Errorf("store %q left after Stop: %v", n.store, err)
	}
	if err := n.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestLaunchBusEarlyExit: a server or responder that exits before it is
// ready fails the start, with its output in the error.
func TestLaunchBusEarlyExit(t *testing.T) {
	t.Setenv(helperEnv, "fail")
	if _, err := StartNATS(t.Context(), os.Args[0]); err == nil || !strings.Contains(err.Error(), "failing on purpose") {
		t.Errorf("StartNATS = %v, want the child's output in the error", err)
	}
	if _, _, err := StartBusResponder(t.Context(), "responder", os.Args[0], "nats://127.0.0.1:1", "s"); err == nil || !strings.Contains(err.Error(), "failing on purpose") {
		t.Errorf("StartBusResponder = %v, want the child's output in the error", err)
	}
}
