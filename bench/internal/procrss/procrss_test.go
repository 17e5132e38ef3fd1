package procrss

import (
	"runtime"
	"strings"
	"testing"
)

// status is the start of a real /proc/<pid>/status (Linux 6.x).
const status = `Name:	switchyard
Umask:	0022
State:	S (sleeping)
Tgid:	4242
Pid:	4242
VmPeak:	 1262592 kB
VmSize:	 1262592 kB
VmLck:	       0 kB
VmHWM:	   23456 kB
VmRSS:	   19876 kB
RssAnon:	    8120 kB
RssFile:	   11756 kB
Threads:	9
`

func TestParse(t *testing.T) {
	const u = Unknown
	for _, tc := range []struct {
		name, text string
		want       RSS
		wantErr    string
	}{
		{"real status", status, RSS{19876, 8120, 11756}, ""},
		{"first line", "VmRSS:\t1 kB\n", RSS{1, u, u}, ""},
		{"no trailing newline", "Name:\tx\nVmRSS:\t 42 kB", RSS{42, u, u}, ""},
		{"zero", "VmRSS:\t0 kB\nRssAnon:\t0 kB\nRssFile:\t0 kB\n", RSS{0, 0, 0}, ""},
		{"old kernel: no Rss lines", "VmHWM:\t9 kB\nVmRSS:\t7 kB\nThreads:\t1\n", RSS{7, u, u}, ""},
		{"only RssAnon", "VmRSS:\t7 kB\nRssAnon:\t3 kB\n", RSS{7, 3, u}, ""},
		{"only RssFile, no trailing newline", "VmRSS:\t7 kB\nRssFile:\t4 kB", RSS{7, u, 4}, ""},
		{"Rss lines before VmRSS", "RssFile:\t4 kB\nRssAnon:\t3 kB\nVmRSS:\t7 kB\n", RSS{7, 3, 4}, ""},
		{"RssShmem is neither", "VmRSS:\t9 kB\nRssAnon:\t3 kB\nRssFile:\t4 kB\nRssShmem:\t2 kB\n", RSS{9, 3, 4}, ""},
		{"VmHWM is not VmRSS", "VmHWM:\t5 kB\n", RSS{}, "no VmRSS"},
		{"zombie: no Vm lines", "Name:\tx\nState:\tZ (zombie)\n", RSS{}, "no VmRSS"},
		{"Rss lines without VmRSS", "RssAnon:\t3 kB\nRssFile:\t4 kB\n", RSS{}, "no VmRSS"},
		{"empty", "", RSS{}, "no VmRSS"},
		{"prefix is not the key", "VmRSSX:\t5 kB\n", RSS{}, "no VmRSS"},
		{"unit", "VmRSS:\t5 MB\n", RSS{}, "malformed VmRSS"},
		{"no unit", "VmRSS:\t5\n", RSS{}, "malformed VmRSS"},
		{"not a number", "VmRSS:\tabc kB\n", RSS{}, "malformed VmRSS"},
		{"negative", "VmRSS:\t-5 kB\n", RSS{}, "malformed VmRSS"},
		{"malformed RssAnon", "VmRSS:\t7 kB\nRssAnon:\tx kB\n", RSS{}, "malformed RssAnon"},
		{"malformed RssFile", "VmRSS:\t7 kB\nRssFile:\t4 MB\n", RSS{}, "malformed RssFile"},
		{"negative RssAnon", "VmRSS:\t7 kB\nRssAnon:\t-1 kB\n", RSS{}, "malformed RssAnon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.text))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Parse = %+v, %v; want an error mentioning %q", got, err, tc.wantErr)
			case got != tc.want:
				t.Errorf("Parse = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	r, err := Read(0)
	if err != nil {
		t.Fatal(err)
	}
	if r.KiB < 1024 {
		t.Errorf("own RSS %d KiB, want at least 1 MiB for a Go test binary", r.KiB)
	}
	// RssAnon and RssFile exist since Linux 4.5; VmRSS also counts RssShmem.
	if r.AnonKiB <= 0 || r.FileKiB <= 0 || r.AnonKiB+r.FileKiB > r.KiB {
		t.Errorf("own RSS %+v, want known anon and file parts summing to at most the total", r)
	}
	if _, err := Read(-1); err == nil {
		t.Error("Read(-1) succeeded")
	}
}
