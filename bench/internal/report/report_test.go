package report_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/bench/internal/report"
)

func TestReportHost(t *testing.T) {
	h := report.HostInfo()
	if h.GoVersion != runtime.Version() || h.NumCPU < 1 {
		t.Errorf("HostInfo = %+v", h)
	}
	s := report.Host{GoVersion: "go1.26.8", GOOS: "linux", GOARCH: "amd64", NumCPU: 2, CPUModel: "AMD EPYC", LoadAvg: "0.50 0.40 0.30"}.String()
	if want := "AMD EPYC, 2 CPUs, linux/amd64, go1.26.8, load average 0.50 0.40 0.30 at start"; s != want {
		t.Errorf("String = %q, want %q", s, want)
	}
}

func TestReportWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	p, err := report.WriteJSON(dir, "x.json", map[string]int{"n": 1})
	if err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]int
	if err := json.Unmarshal(b, &v); err != nil || v["n"] != 1 || !strings.HasSuffix(string(b), "\n") {
		t.Errorf("file %q: %v %v", b, v, err)
	}
}

func TestReportTopology(t *testing.T) {
	if s := (report.Topology{Edges: 1, Routers: 2, Workers: 4}).String(); s != "1 edge, 2 routers, 4 workers" {
		t.Errorf("String = %q", s)
	}
}
