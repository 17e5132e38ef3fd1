package config

import (
	"fmt"
	"path/filepath"

	"github.com/switchyard-mcp/switchyard/proto"
)

// SandboxFile confines a stdio server's processes (upstreams[].sandbox;
// docs/sandbox.md): its working directory, another user and group, its
// resource limits, and Landlock filesystem rules. Unset fields leave the
// defaults (the worker's directory, user and group, no limits, no rules).
type SandboxFile struct {
	Workdir string `yaml:"workdir,omitempty"`
	// User and Group are numeric ids to run as (the worker must be
	// allowed to switch to them: root, or CAP_SETUID/CAP_SETGID).
	User  *uint32 `yaml:"user,omitempty"`
	Group *uint32 `yaml:"group,omitempty"`
	// Limits are setrlimit(2) limits, soft and hard alike.
	Limits struct {
		MemoryBytes uint64 `yaml:"memory_bytes,omitempty"` // address space (RLIMIT_AS)
		OpenFiles   uint64 `yaml:"open_files,omitempty"`   // RLIMIT_NOFILE
		Processes   uint64 `yaml:"processes,omitempty"`    // RLIMIT_NPROC (of its user; not enforced for root)
		CPUSeconds  uint64 `yaml:"cpu_seconds,omitempty"`  // RLIMIT_CPU
	} `yaml:"limits,omitempty"`
	// Landlock: outside these paths the server reads, writes and executes
	// nothing (where the kernel has Landlock; else the worker says so in
	// its log). Absolute paths; both empty: no rules.
	Landlock struct {
		ReadOnly  []string `yaml:"read_only,omitempty"`
		ReadWrite []string `yaml:"read_write,omitempty"`
	} `yaml:"landlock,omitempty"`
}

// Spec converts s to its catalog form (nil for nil).
func (s *SandboxFile) Spec() *proto.Sandbox {
	if s == nil {
		return nil
	}
	sp := &proto.Sandbox{
		Workdir: s.Workdir, MemoryBytes: s.Limits.MemoryBytes, OpenFiles: s.Limits.OpenFiles,
		Processes: s.Limits.Processes, CPUSeconds: s.Limits.CPUSeconds,
		ReadOnly: s.Landlock.ReadOnly, ReadWrite: s.Landlock.ReadWrite,
	}
	if s.User != nil {
		sp.UID = *s.User
	}
	if s.Group != nil {
		sp.GID = *s.Group
	}
	return sp
}

// check reports s's problems: relative paths, and a memory limit too small
// for any program to start (under 16 MiB).
func (s *SandboxFile) check() []error {
	if s == nil {
		return nil
	}
	var errs []error
	if s.Workdir != "" && !filepath.IsAbs(s.Workdir) {
		errs = append(errs, fmt.Errorf("workdir: %q must be an absolute path", s.Workdir))
	}
	for _, l := range []struct {
		name  string
		paths []string
	}{{"landlock.read_only", s.Landlock.ReadOnly}, {"landlock.read_write", s.Landlock.ReadWrite}} {
		for i, p := range l.paths {
			if !filepath.IsAbs(p) {
				errs = append(errs, fmt.Errorf("%s[%d]: %q must be an absolute path", l.name, i, p))
			}
		}
	}
	if m := s.Limits.MemoryBytes; m != 0 && m < 16<<20 {
		errs = append(errs, fmt.Errorf("limits.memory_bytes: %d is under 16 MiB: no program starts in that", m))
	}
	return errs
}
