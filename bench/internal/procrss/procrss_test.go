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
	for _, tc := range []struct {
		name, text string
		want       int64
		wantErr    string
	}{
		{"real status", status, 19876, ""},
		{"first line", "VmRSS:\t1 kB\n", 1, ""},
		{"no trailing newline", "Name:\tx\nVmRSS:\t 42 kB", 42, ""},
		{"zero", "VmRSS:\t0 kB\n", 0, ""},
		{"VmHWM is not VmRSS", "VmHWM:\t5 kB\n", 0, "no VmRSS"},
		{"zombie: no Vm lines", "Name:\tx\nState:\tZ (zombie)\n", 0, "no VmRSS"},
		{"empty", "", 0, "no VmRSS"},
		{"prefix is not the key", "VmRSSX:\t5 kB\n", 0, "no VmRSS"},
		{"unit", "VmRSS:\t5 MB\n", 0, "malformed"},
		{"no unit", "VmRSS:\t5\n", 0, "malformed"},
		{"not a number", "VmRSS:\tabc kB\n", 0, "malformed"},
		{"negative", "VmRSS:\t-5 kB\n", 0, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.text))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Parse = %d, %v; want an error mentioning %q", got, err, tc.wantErr)
			case got != tc.want:
				t.Errorf("Parse = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestReadSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	kib, err := Read(0)
	if err != nil {
		t.Fatal(err)
	}
	if kib < 1024 {
		t.Errorf("own RSS %d KiB, want at least 1 MiB for a Go test binary", kib)
	}
	if _, err := Read(-1); err == nil {
		t.Error("Read(-1) succeeded")
	}
}
