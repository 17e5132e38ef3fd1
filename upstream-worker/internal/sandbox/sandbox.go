// Package sandbox confines the stdio servers a worker runs
// (docs/sandbox.md): resource limits and Landlock filesystem rules, which
// a process can only set on itself, are applied by a launcher, the
// worker's own executable started with a request in its environment
// (EnvLaunch), which sets them and then executes the server in its place.
// Every binary that links this package launches on such a request before
// main runs (init); nothing else in it changes.
//
// Another uid and gid, the working directory, the scrubbed environment
// and the process group are the worker's to set when it starts the
// launcher (os/exec); see upstream-worker/internal/upstream.
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// EnvLaunch names the environment variable that carries a launch request
// (a JSON [Launch]) to the launcher; it is removed before the server runs.
const EnvLaunch = "SWITCHYARD_SANDBOX_LAUNCH"

// Launch is what the launcher applies, then executes.
type Launch struct {
	// Argv is the server's command: Argv[0] is looked up in the PATH of
	// the server's environment.
	Argv []string `json:"argv"`
	// Limits are the rlimits to set (0: unchanged), soft and hard alike.
	Limits Limits `json:"limits"`
	// ReadOnly and ReadWrite are the Landlock rules: outside them the
	// server may not read, write or execute anything. Both empty: no
	// Landlock. Paths that do not exist are skipped.
	ReadOnly  []string `json:"read_only,omitempty"`
	ReadWrite []string `json:"read_write,omitempty"`
}

// Limits are the resource limits of a server process (setrlimit(2)).
type Limits struct {
	MemoryBytes uint64 `json:"memory_bytes,omitempty"` // RLIMIT_AS: its address space
	OpenFiles   uint64 `json:"open_files,omitempty"`   // RLIMIT_NOFILE
	Processes   uint64 `json:"processes,omitempty"`    // RLIMIT_NPROC: of its user, all processes
	CPUSeconds  uint64 `json:"cpu_seconds,omitempty"`  // RLIMIT_CPU: SIGXCPU, then SIGKILL
}

// Needed reports whether l needs the launcher (any limit or rule).
func (l *Launch) Needed() bool {
	return l.Limits != (Limits{}) || len(l.ReadOnly) > 0 || len(l.ReadWrite) > 0
}

// LandlockABI returns the Landlock ABI version the kernel supports, 0 if
// none (an old kernel, or Landlock disabled): rules are then not applied.
func LandlockABI() int {
	v, err := llsyscall.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

func init() {
	if v, ok := os.LookupEnv(EnvLaunch); ok {
		launch(v)
	}
}

// launch runs in the launcher: it applies the request and executes the
// server, or exits 126 with the reason on stderr (the worker logs it).
func launch(raw string) {
	if err := run(raw); err != nil {
		fmt.Fprintf(os.Stderr, "switchyard sandbox: %v\n", err)
		os.Exit(126)
	}
}

func run(raw string) error {
	var l Launch
	if err := json.Unmarshal([]byte(raw), &l); err != nil || len(l.Argv) == 0 {
		return errors.New("bad launch request")
	}
	if err := os.Unsetenv(EnvLaunch); err != nil {
		return err
	}
	path, err := exec.LookPath(l.Argv[0])
	if err != nil {
		return fmt.Errorf("command %q: %w", l.Argv[0], err)
	}
	if len(l.ReadOnly) > 0 || len(l.ReadWrite) > 0 {
		// BestEffort: the rules the kernel knows are enforced; on a
		// kernel without Landlock none are (the worker says so in its
		// log when it starts the server: LandlockABI).
		err := landlock.V5.BestEffort().RestrictPaths(
			landlock.RODirs(l.ReadOnly...).IgnoreIfMissing(),
			landlock.RWDirs(l.ReadWrite...).IgnoreIfMissing(),
		)
		if err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	// The limits last, just before exec: the launcher's own allocations
	// come before them.
	for _, r := range []struct {
		res  int
		v    uint64
		name string
	}{
		{syscall.RLIMIT_AS, l.Limits.MemoryBytes, "memory_bytes"},
		{syscall.RLIMIT_NOFILE, l.Limits.OpenFiles, "open_files"},
		{rlimitNPROC, l.Limits.Processes, "processes"},
		{syscall.RLIMIT_CPU, l.Limits.CPUSeconds, "cpu_seconds"},
	} {
		if r.v == 0 {
			continue
		}
		if err := syscall.Setrlimit(r.res, &syscall.Rlimit{Cur: r.v, Max: r.v}); err != nil {
			return fmt.Errorf("limit %s: %w", r.name, err)
		}
	}
	return syscall.Exec(path, l.Argv, os.Environ())
}

// rlimitNPROC is RLIMIT_NPROC (syscall has no name for it on Linux).
const rlimitNPROC = 6
