package report_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

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

func TestReportIdleRSS(t *testing.T) {
	r := &report.IdleRSS{After: 2 * time.Second, Processes: []report.ProcessRSS{
		{Process: "nats", PID: 10, KiB: 32828, AnonKiB: 3292, FileKiB: 23175},
		{Process: "edge-1", PID: 11, KiB: 30000, AnonKiB: 4100, FileKiB: 20000},
	}}
	if r.MaxKiB() != 32828 || r.MaxAnonKiB() != 4100 {
		t.Errorf("MaxKiB %d, MaxAnonKiB %d; want 32828, 4100", r.MaxKiB(), r.MaxAnonKiB())
	}
	if got, want := r.Text(), "idle RSS after 2s (KiB): nats 32828 (anon 3292, file 23175), edge-1 30000 (anon 4100, file 20000); max 32828, max anon 4100"; got != want {
		t.Errorf("Text =\n%s\nwant\n%s", got, want)
	}
	// The old keys stay; the parts come as two more.
	b, err := json.Marshal(r.Processes[0])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"process":"nats","pid":10,"rss_kib":32828,"rss_anon_kib":3292,"rss_file_kib":23175}`; got != want {
		t.Errorf("JSON %s, want %s", got, want)
	}

	// One unknown anon part makes the maximum unknown: the others' maximum
	// could understate it.
	r.Processes[1].AnonKiB = report.UnknownKiB
	if r.MaxAnonKiB() != report.UnknownKiB || !strings.HasSuffix(r.Text(), "edge-1 30000 (anon ?, file 20000); max 32828, max anon ?") {
		t.Errorf("MaxAnonKiB %d, Text %q", r.MaxAnonKiB(), r.Text())
	}
	if got := (&report.IdleRSS{}).MaxAnonKiB(); got != report.UnknownKiB {
		t.Errorf("MaxAnonKiB of no process = %d", got)
	}
}
