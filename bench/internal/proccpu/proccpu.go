// Package proccpu reads the CPU time a Linux process has used so far, from
// /proc/<pid>/stat (utime + stime, all threads). On other systems Read
// fails because the file does not exist.
package proccpu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ticksPerSecond is USER_HZ, the unit of the times in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports (the kernel converts from
// its internal HZ), so it is not read with sysconf (which would need cgo).
const ticksPerSecond = 100

// Tick is the resolution of the values Read returns.
const Tick = time.Second / ticksPerSecond

// Read returns the user plus system CPU time that process pid has used,
// with a resolution of [Tick]. Use pid 0 for the calling process.
func Read(pid int) (time.Duration, error) {
	path := "/proc/self/stat"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("proccpu: %w", err)
	}
	return Parse(b)
}

// Parse extracts utime + stime from the contents of a /proc/<pid>/stat
// file. The command name (field 2) may hold spaces and parentheses, so the
// fields are counted from the last ')'.
func Parse(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("proccpu: malformed stat: no ')'")
	}
	// After the command come field 3 (state) onwards; utime and stime
	// are fields 14 and 15, i.e. indexes 11 and 12 here.
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("proccpu: malformed stat: %d fields after the command", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proccpu: malformed stat: %w", err)
		}
		ticks += v
	}
	return time.Duration(ticks) * Tick, nil
}

// Children returns the process ids of pid's children, from
// /proc/<pid>/task/<tid>/children (every thread's); nil where that is not
// available.
func Children(pid int) []int {
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
