package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestComposeBenchCommand parses the command of compose.yaml's bench
// service (the latency gate against the compose deployment) with the real
// "bench latency" flag set, so a renamed or removed flag fails here.
// switchyard/internal/composecheck checks the rest of that service.
func TestComposeBenchCommand(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "compose.yaml"))
	if err != nil {
		t.Fatalf("compose.yaml belongs at the repository root: %v", err)
	}
	var c struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	s, ok := c.Services["bench"]
	if !ok {
		t.Fatal("compose.yaml has no bench service")
	}
	cmd := s.Command
	if len(cmd) < 2 || cmd[0] != "/bench" || cmd[1] != "latency" {
		t.Fatalf("bench: command %q, want [/bench latency ...]", cmd)
	}
	fs, o := latencyFlags()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(cmd[2:]); err != nil {
		t.Fatalf("bench: command %q: %v", cmd, err)
	}
	if _, err := o.check(fs); err != nil {
		t.Fatalf("bench: command %q: %v", cmd, err)
	}
	if o.endpoint.mode != "compose" || o.endpoint.starts() || o.maxAdded != 0 {
		t.Errorf("bench: mode %q, starts %v, max-added-p50 %v: want compose, against the deployment, no gate",
			o.endpoint.mode, o.endpoint.starts(), o.maxAdded)
	}
}
