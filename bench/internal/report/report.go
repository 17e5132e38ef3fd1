// Package report holds what every bench result file shares: a description
// of the machine that produced it and the helpers that write result files.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/mdtable"
)

// Host describes the machine and toolchain a result was measured on.
type Host struct {
	GoVersion string `json:"go_version"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	NumCPU    int    `json:"num_cpu"`
	// CPUModel is the first "model name" in /proc/cpuinfo; empty elsewhere.
	CPUModel string `json:"cpu_model,omitempty"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute load averages when the
	// run started: other work on the machine skews the results.
	LoadAvg string `json:"loadavg,omitempty"`
}

// HostInfo describes the running machine.
func HostInfo() Host {
	return Host{
		GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		NumCPU: runtime.NumCPU(), CPUModel: cpuModel(), LoadAvg: LoadAvg(),
	}
}

// String returns a one-line description for Markdown reports.
func (h Host) String() string {
	cpu := h.CPUModel
	if cpu == "" {
		cpu = "unknown CPU"
	}
	s := fmt.Sprintf("%s, %d CPUs, %s/%s, %s", cpu, h.NumCPU, h.GOOS, h.GOARCH, h.GoVersion)
	if h.LoadAvg != "" {
		s += ", load average " + h.LoadAvg + " at start"
	}
	return s
}

// LoadAvg returns /proc/loadavg's 1, 5 and 15 minute load averages now,
// "" where there is no such file.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Stamp formats t for file and directory names: 20261130-052320 (UTC).
func Stamp(t time.Time) string { return t.UTC().Format("20060102-150405") }

// WriteFile writes data to dir/name, creating dir, and returns the path.
func WriteFile(dir, name string, data []byte) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, data, 0o644)
}

// WriteJSON writes v, indented, to dir/name and returns the path.
func WriteJSON(dir, name string, v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	return WriteFile(dir, name, append(b, '\n'))
}

// Topology is the shape of a multi-process gateway the driver started: how
// many processes of each scaled role (plus one NATS server and one
// tenancy-svc).
type Topology struct {
	Edges   int `json:"edges"`
	Routers int `json:"routers"`
	Workers int `json:"workers"`
}

// String returns "1 edge, 1 router, 4 workers".
func (t Topology) String() string {
	return fmt.Sprintf("%s, %s, %s", plural(t.Edges, "edge"), plural(t.Routers, "router"), plural(t.Workers, "worker"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// ProcessRSS is one gateway process's resident set size, read from
// /proc/<pid>/status (VmRSS) while the gateway is idle: started and ready,
// before any load.
type ProcessRSS struct {
	Process string `json:"process"` // nats, tenancy-svc, router-1, worker-1, edge-1, ...
	PID     int    `json:"pid"`
	KiB     int64  `json:"rss_kib"`
}

// IdleRSS is the idle resident set size of every gateway process.
type IdleRSS struct {
	// After is how long the processes had been ready when read.
	After     time.Duration `json:"after_ns"`
	Processes []ProcessRSS  `json:"processes"`
}

// MaxKiB returns the largest RSS, 0 when there is none.
func (r *IdleRSS) MaxKiB() int64 {
	var m int64
	for _, p := range r.Processes {
		m = max(m, p.KiB)
	}
	return m
}

// Text returns one line: "idle RSS after 2s (KiB): nats 12345, edge-1 23456; max 23456".
func (r *IdleRSS) Text() string {
	parts := make([]string, len(r.Processes))
	for i, p := range r.Processes {
		parts[i] = fmt.Sprintf("%s %d", p.Process, p.KiB)
	}
	return fmt.Sprintf("idle RSS after %v (KiB): %s; max %d", r.After, strings.Join(parts, ", "), r.MaxKiB())
}

// Markdown returns a table with one row per process, in KiB and MiB.
func (r *IdleRSS) Markdown() string {
	t := mdtable.Table{
		Header: []string{"process", "pid", "idle RSS KiB", "MiB"},
		Right:  []bool{false, true, true, true},
	}
	for _, p := range r.Processes {
		t.AddRow(p.Process, strconv.Itoa(p.PID), strconv.FormatInt(p.KiB, 10), fmt.Sprintf("%.1f", float64(p.KiB)/1024))
	}
	return t.String()
}
