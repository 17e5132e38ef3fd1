package proccpu_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/bench/internal/proccpu"
)

func TestProcCPUParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{
			name: "plain",
			stat: "1234 (switchyard) S 1 1234 1234 0 -1 4194560 2771 0 0 0 150 37 0 0 20 0 12 0 5511 1 2 3\n",
			want: 1870 * time.Millisecond,
		},
		{
			name: "command with spaces and parens",
			stat: "77 (a (b) c) R 1 77 77 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1",
			want: 70 * time.Millisecond,
		},
		{name: "no paren", stat: "77 bench R 1", wantErr: true},
		{name: "truncated", stat: "77 (bench) R 1 2 3", wantErr: true},
		{name: "not a number", stat: "1 (x) S 1 1 1 0 -1 0 0 0 0 0 x 4 0", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := proccpu.Parse([]byte(tc.stat))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse error = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("Parse = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProcCPURead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	if _, err := proccpu.Read(0); err != nil {
		t.Fatalf("Read(self): %v", err)
	}
	if _, err := proccpu.Read(os.Getpid()); err != nil {
		t.Fatalf("Read(pid): %v", err)
	}
}

func TestProcCPUChildren(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d/children", os.Getpid(), os.Getpid())); err != nil {
		t.Skip("kernel without /proc/<pid>/task/<tid>/children")
	}
	if got := proccpu.Children(os.Getpid()); !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("Children = %v, want it to hold %d", got, cmd.Process.Pid)
	}
	if got := proccpu.Children(cmd.Process.Pid); len(got) != 0 {
		t.Errorf("Children of sleep = %v", got)
	}
}
