package main

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/bench/internal/sweep"
)

func TestSweepFlagsProxy(t *testing.T) {
	urls := []string{"-gateway", "http://g/mcp", "-direct", "http://d/mcp"}
	for _, tc := range []struct {
		name      string
		args      []string
		wantErr   string
		wantProxy sweep.Endpoint // config()'s before anything is started
	}{
		{name: "no proxy", args: urls},
		{name: "started proxy", args: []string{"-start-embedded", "-proxy"}},
		{name: "started proxy in a cluster", args: []string{"-start-cluster", "-proxy"}},
		{name: "started proxy for tools/call only", args: []string{"-start-embedded", "-proxy", "-methods", "tools/call", "-federation", ""}},
		{name: "running proxy", args: append([]string{"-proxy-url", "http://p/mcp"}, urls...), wantProxy: sweep.Endpoint{URL: "http://p/mcp", Tool: "echo"}},
		{name: "running proxy calls -tool, not -gw-tool", args: append([]string{"-proxy-url", "http://p/mcp", "-tool", "t", "-gw-tool", "gt"}, urls...), wantProxy: sweep.Endpoint{URL: "http://p/mcp", Tool: "t"}},
		{name: "-proxy in url mode", args: append([]string{"-proxy"}, urls...), wantErr: "-proxy needs -start-embedded or -start-cluster"},
		{name: "-proxy-url with -start-embedded", args: []string{"-start-embedded", "-proxy-url", "http://p/mcp"}, wantErr: "-proxy-url needs -gateway and -direct"},
		{name: "both", args: []string{"-start-cluster", "-proxy", "-proxy-url", "http://p/mcp"}, wantErr: "-proxy-url needs"},
		{name: "-proxy without methods", args: []string{"-start-embedded", "-proxy", "-methods", ""}, wantErr: "-methods is empty"},
		{name: "-proxy-url without methods", args: append([]string{"-proxy-url", "http://p/mcp", "-methods", ""}, urls...), wantErr: "-methods is empty"},
		{name: "extra argument", args: append([]string{"-proxy-url", "http://p/mcp", "x"}, urls...), wantErr: "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("EDGES", "")
			fs, o := sweepFlags()
			fs.SetOutput(io.Discard)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			cfg, err := o.config(fs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("config = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("config: %v", err)
			}
			if !reflect.DeepEqual(cfg.Env.Proxy, tc.wantProxy) {
				t.Errorf("config().Env.Proxy = %+v, want %+v", cfg.Env.Proxy, tc.wantProxy)
			}
		})
	}
}
