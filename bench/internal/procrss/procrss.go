// Package procrss reads the resident set size of a Linux process, the
// VmRSS line of /proc/<pid>/status. On other systems Read fails because the
// file does not exist.
package procrss

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Read returns process pid's resident set size in KiB. Use pid 0 for the
// calling process.
func Read(pid int) (int64, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("procrss: %w", err)
	}
	return Parse(b)
}

// Parse extracts VmRSS, in KiB, from the contents of a /proc/<pid>/status
// file ("VmRSS:	   12345 kB"; the kernel's "kB" are KiB). A zombie or
// kernel thread has no VmRSS line, which is an error.
func Parse(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "VmRSS" {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("procrss: malformed VmRSS line %q", sc.Text())
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("procrss: malformed VmRSS line %q", sc.Text())
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("procrss: %w", err)
	}
	return 0, errors.New("procrss: no VmRSS line (zombie or kernel thread?)")
}
