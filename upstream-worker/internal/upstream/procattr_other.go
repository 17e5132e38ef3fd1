//go:build !linux

package upstream

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// isolate does nothing here: process groups and Pdeathsig are Linux's
// (the worker's supported platform); the process alone is stopped.
func isolate(*exec.Cmd) {}

// killGroup signals the process alone.
func killGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
