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
	// NATS is how the processes reach the NATS server (launch.NATSTLS,
	// NATSCreds, NATSNone); "" in reports written before it was recorded.
	NATS string `json:"nats,omitempty"`
}

// String returns "1 edge, 1 router, 4 workers" and, when recorded, the
// bus's security ("..., NATS tls").
func (t Topology) String() string {
	s := fmt.Sprintf("%s, %s, %s", plural(t.Edges, "edge"), plural(t.Routers, "router"), plural(t.Workers, "worker"))
	if t.NATS != "" {
		s += ", NATS " + t.NATS
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// ProcessRSS is one gateway process's resident set size, read from
// /proc/<pid>/status while the gateway is idle: started and ready, before
// any load. KiB is the total (VmRSS); AnonKiB (RssAnon) is the process's
// own memory; FileKiB (RssFile) is mostly the switchyard binary's text and
// read-only data mapped from the page cache, clean and shared by every
// process of the binary, so it is not a per-process cost. AnonKiB and
// FileKiB are -1 ([UnknownKiB]) when the kernel does not report them
// (before Linux 4.5); the total also counts RssShmem, so the parts may sum
// to less than it.
type ProcessRSS struct {
	Process string `json:"process"` // nats, tenancy-svc, router-1, worker-1, edge-1, ...
	PID     int    `json:"pid"`
	KiB     int64  `json:"rss_kib"`
	AnonKiB int64  `json:"rss_anon_kib"`
	FileKiB int64  `json:"rss_file_kib"`
}

// UnknownKiB is a [ProcessRSS] part the kernel did not report.
const UnknownKiB int64 = -1

// IdleRSS is the idle resident set size of every gateway process.
type IdleRSS struct {
	// After is how long the processes had been ready when read.
	After     time.Duration `json:"after_ns"`
	Processes []ProcessRSS  `json:"processes"`
}

// MaxKiB returns the largest total RSS, 0 when there is none.
func (r *IdleRSS) MaxKiB() int64 {
	var m int64
	for _, p := range r.Processes {
		m = max(m, p.KiB)
	}
	return m
}

// MaxAnonKiB returns the largest RssAnon, [UnknownKiB] when there is no
// process or any process's is unknown (a maximum over some processes only
// would understate it).
func (r *IdleRSS) MaxAnonKiB() int64 {
	m := UnknownKiB
	for _, p := range r.Processes {
		if p.AnonKiB < 0 {
			return UnknownKiB
		}
		m = max(m, p.AnonKiB)
	}
	return m
}

// Text returns one line, in KiB: "idle RSS after 2s (KiB): nats 12345
// (anon 3292, file 8000), edge-1 23456 (anon 4100, file 18000); max 23456,
// max anon 4100". An unknown part prints as "?".
func (r *IdleRSS) Text() string {
	parts := make([]string, len(r.Processes))
	for i, p := range r.Processes {
		parts[i] = fmt.Sprintf("%s %d (anon %s, file %s)", p.Process, p.KiB, KiBText(p.AnonKiB), KiBText(p.FileKiB))
	}
	return fmt.Sprintf("idle RSS after %v (KiB): %s; max %d, max anon %s", r.After, strings.Join(parts, ", "), r.MaxKiB(), KiBText(r.MaxAnonKiB()))
}

// KiBText formats a KiB count, "?" when negative ([UnknownKiB]).
func KiBText(kib int64) string {
	if kib < 0 {
		return "?"
	}
	return strconv.FormatInt(kib, 10)
}

// Markdown returns a table with one row per process: the total in KiB and
// MiB, then the anon and file parts in KiB ("?" when unknown).
func (r *IdleRSS) Markdown() string {
	t := mdtable.Table{
		Header: []string{"process", "pid", "idle RSS KiB", "MiB", "anon KiB", "file KiB"},
		Right:  []bool{false, true, true, true, true, true},
	}
	for _, p := range r.Processes {
		t.AddRow(p.Process, strconv.Itoa(p.PID), strconv.FormatInt(p.KiB, 10), fmt.Sprintf("%.1f", float64(p.KiB)/1024),
			KiBText(p.AnonKiB), KiBText(p.FileKiB))
	}
	return t.String()
}

// MarkdownNote says what the anon and file columns of [IdleRSS.Markdown]
// mean; result files print it under the table's heading.
const MarkdownNote = "anon is RssAnon, the process's own memory (heap, stacks, runtime); file is RssFile, mostly the switchyard binary's code and read-only data mapped from the page cache: clean and shared by every gateway process (one copy in memory), so not a per-process cost. VmRSS also counts RssShmem."
