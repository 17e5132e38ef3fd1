// Package procrss reads the resident set size of a Linux process from
// /proc/<pid>/status: the total (VmRSS) and its anonymous and file-backed
// parts (RssAnon, RssFile). On other systems Read fails because the file
// does not exist.
//
// The split matters for a Go binary: most of an idle process's VmRSS is
// RssFile, the binary's text and read-only data mapped from the page cache,
// clean and shared by every process running the same binary (and, with
// large page-cache folios, mapped in big chunks whether touched or not).
// RssAnon is the process's own memory: heap, stacks, runtime structures.
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

// Unknown is the value of [RSS.AnonKiB] and [RSS.FileKiB] when the status
// file has no such line (kernels before 4.5).
const Unknown int64 = -1

// RSS is a process's resident set size, in KiB.
type RSS struct {
	// KiB is the total, VmRSS; always known (≥ 0).
	KiB int64
	// AnonKiB is RssAnon, the anonymous (private) part; Unknown if absent.
	AnonKiB int64
	// FileKiB is RssFile, the file-backed part (mostly the binary mapped
	// from the page cache, shared); Unknown if absent.
	FileKiB int64
}

// Read returns process pid's resident set size. Use pid 0 for the calling
// process. It fails when the status file cannot be read or [Parse] fails.
func Read(pid int) (RSS, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return RSS{}, fmt.Errorf("procrss: %w", err)
	}
	return Parse(b)
}

// Parse extracts VmRSS, RssAnon and RssFile, in KiB, from the contents of a
// /proc/<pid>/status file ("VmRSS:	   12345 kB"; the kernel's "kB" are
// KiB). A missing VmRSS line (a zombie or kernel thread) is an error; a
// missing RssAnon or RssFile line (an old kernel) leaves that field
// [Unknown]. Any of the three lines present but malformed is an error.
func Parse(status []byte) (RSS, error) {
	r := RSS{KiB: Unknown, AnonKiB: Unknown, FileKiB: Unknown}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &r.KiB
		case "RssAnon":
			dst = &r.AnonKiB
		case "RssFile":
			dst = &r.FileKiB
		default:
			continue
		}
		n, err := parseKB(v)
		if err != nil {
			return RSS{}, fmt.Errorf("procrss: malformed %s line %q", k, sc.Text())
		}
		*dst = n
	}
	if err := sc.Err(); err != nil {
		return RSS{}, fmt.Errorf("procrss: %w", err)
	}
	if r.KiB == Unknown {
		return RSS{}, errors.New("procrss: no VmRSS line (zombie or kernel thread?)")
	}
	return r, nil
}

// parseKB parses a status value such as "   12345 kB" into 12345.
func parseKB(v string) (int64, error) {
	f := strings.Fields(v)
	if len(f) != 2 || f[1] != "kB" {
		return 0, errors.New("not <n> kB")
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("not a count")
	}
	return n, nil
}
