// Package bins builds, once per test binary, the executables that
// integration tests run as separate processes, into a temporary directory
// that the package's TestMain removes with [Cleanup] after m.Run.
package bins

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// SDKVersion is the pinned go-sdk version the everything-server is built from.
const SDKVersion = "v1.8.0"

var (
	mu    sync.Mutex
	dir   string
	built = map[string]string{}
)

// Cleanup removes the directory the executables were built into (a
// go-built switchyard alone is ~50 MB). Call it from TestMain after m.Run;
// nothing built may run afterwards.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
		dir, built = "", map[string]string{}
	}
}

func binDir(t testing.TB) string {
	if dir == "" {
		d, err := os.MkdirTemp("", "switchyard-test-bin-")
		if err != nil {
			t.Fatalf("bins: %v", err)
		}
		dir = d
	}
	return dir
}

// Everything returns the path of the go-sdk conformance everything-server:
// $SWITCHYARD_EVERYTHING_SERVER if set (the Makefile builds it), else it is
// installed from the module proxy at [SDKVersion].
func Everything(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SWITCHYARD_EVERYTHING_SERVER"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built["everything"]; ok {
		return p
	}
	d := binDir(t)
	cmd := exec.Command("go", "install", "github.com/modelcontextprotocol/go-sdk/conformance/everything-server@"+SDKVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+d, "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bins: install everything-server: %v\n%s", err, out)
	}
	p := filepath.Join(d, "everything-server")
	built["everything"] = p
	return p
}

// Build compiles the main package pkg (an import path in this workspace)
// into a temporary directory and returns the executable's path.
func Build(t testing.TB, name, pkg string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built[name]; ok {
		return p
	}
	p := filepath.Join(binDir(t), name)
	cmd := exec.Command("go", "build", "-o", p, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bins: build %s: %v\n%s", pkg, err, out)
	}
	built[name] = p
	return p
}
