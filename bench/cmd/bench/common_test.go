package main

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/bench/internal/latency"
	"github.com/switchyard-mcp/switchyard/bench/internal/report"
)

// parse registers the endpoint flags, parses args and checks them.
func parse(t *testing.T, args ...string) (*endpointFlags, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f endpointFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	_, err := f.check(fs)
	return &f, err
}

func TestEndpointFlagsModes(t *testing.T) {
	for _, k := range []string{"EDGES", "ROUTERS", "WORKERS"} {
		t.Setenv(k, "")
	}
	for _, tc := range []struct {
		args     []string
		mode     string
		wantErr  string
		wantTopo report.Topology
	}{
		{args: []string{"-start-embedded"}, mode: modeEmbedded, wantTopo: report.Topology{Edges: 1, Routers: 1, Workers: 1}},
		{args: []string{"-start-cluster"}, mode: modeCluster, wantTopo: report.Topology{Edges: 1, Routers: 1, Workers: 1}},
		{args: []string{"-start-cluster", "-edges", "2", "-workers", "4"}, mode: modeCluster, wantTopo: report.Topology{Edges: 2, Routers: 1, Workers: 4}},
		{args: []string{"-gateway", "http://g/mcp", "-direct", "http://d/mcp"}, mode: modeURL},
		{args: []string{"-gateway-url", "http://g/mcp", "-direct", "http://d/mcp"}, mode: modeURL},
		{args: []string{"-gateway-url", "http://g/mcp", "-direct", "http://d/mcp", "-mode", "compose"}, mode: "compose"},
		{args: []string{"-start-embedded", "-start-cluster"}, wantErr: "either -start-embedded or -start-cluster"},
		{args: []string{"-start-cluster", "-gateway", "http://g/mcp"}, wantErr: "or -gateway/-direct"},
		{args: []string{"-gateway", "http://g/mcp"}, wantErr: "need -gateway and -direct"},
		{args: []string{"-start-embedded", "-workers", "2"}, wantErr: "need -start-cluster"},
		{args: []string{"-start-cluster", "-routers", "0"}, wantErr: "need 1 to 64 routers, got 0"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f, err := parse(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("check = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if f.mode != tc.mode {
				t.Errorf("mode = %q, want %q", f.mode, tc.mode)
			}
			if f.startCluster && f.topo != tc.wantTopo {
				t.Errorf("topology = %+v, want %+v", f.topo, tc.wantTopo)
			}
		})
	}
}

func TestTopologyFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		name    string
		flags   report.Topology
		set     map[string]bool
		env     map[string]string
		want    report.Topology
		wantErr string
	}{
		{name: "defaults", flags: report.Topology{Edges: 1, Routers: 1, Workers: 1}, want: report.Topology{Edges: 1, Routers: 1, Workers: 1}},
		{
			name: "environment fills what the flags leave", flags: report.Topology{Edges: 1, Routers: 1, Workers: 1},
			env: map[string]string{"EDGES": "2", "ROUTERS": "3", "WORKERS": "4"}, want: report.Topology{Edges: 2, Routers: 3, Workers: 4},
		},
		{
			name: "flags win", flags: report.Topology{Edges: 1, Routers: 1, Workers: 8}, set: map[string]bool{"workers": true},
			env: map[string]string{"WORKERS": "4", "EDGES": "2"}, want: report.Topology{Edges: 2, Routers: 1, Workers: 8},
		},
		{
			name: "not a number", flags: report.Topology{Edges: 1, Routers: 1, Workers: 1},
			env: map[string]string{"WORKERS": "four"}, wantErr: `$WORKERS: "four" is not a number`,
		},
		{
			name: "out of range", flags: report.Topology{Edges: 1, Routers: 1, Workers: 1},
			env: map[string]string{"EDGES": "0", "WORKERS": "65"}, wantErr: "need 1 to 64 edges, got 0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := tc.flags
			err := topologyFromEnv(&topo, tc.set, env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("topologyFromEnv = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || topo != tc.want {
				t.Errorf("topologyFromEnv = %+v, %v; want %+v", topo, err, tc.want)
			}
		})
	}
}

func TestEndpointFlagsEnvTopology(t *testing.T) {
	t.Setenv("EDGES", "")
	t.Setenv("ROUTERS", "2")
	t.Setenv("WORKERS", "4")
	f, err := parse(t, "-start-cluster", "-routers", "1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (report.Topology{Edges: 1, Routers: 1, Workers: 4}); f.topo != want {
		t.Errorf("topology = %+v, want %+v", f.topo, want)
	}
	// Without -start-cluster the environment is not looked at.
	if _, err := parse(t, "-start-embedded"); err != nil {
		t.Errorf("-start-embedded with WORKERS set: %v", err)
	}
}

func TestLatencyFlagsProxy(t *testing.T) {
	urls := []string{"-gateway", "http://g/mcp", "-direct", "http://d/mcp"}
	for _, tc := range []struct {
		name      string
		args      []string
		wantErr   string
		wantProxy *latency.Target // config() before anything is started
	}{
		{name: "no proxy", args: urls},
		{name: "started proxy", args: []string{"-start-embedded", "-proxy"}},
		{name: "started proxy in a cluster", args: []string{"-start-cluster", "-proxy"}},
		{name: "running proxy", args: append([]string{"-proxy-url", "http://p/mcp"}, urls...), wantProxy: &latency.Target{URL: "http://p/mcp", Tool: "echo"}},
		{name: "running proxy calls -tool", args: append([]string{"-proxy-url", "http://p/mcp", "-tool", "t"}, urls...), wantProxy: &latency.Target{URL: "http://p/mcp", Tool: "t"}},
		{name: "-proxy in url mode", args: append([]string{"-proxy"}, urls...), wantErr: "-proxy needs -start-embedded or -start-cluster"},
		{name: "-proxy-url with -start-embedded", args: []string{"-start-embedded", "-proxy-url", "http://p/mcp"}, wantErr: "-proxy-url needs -gateway and -direct"},
		{name: "both", args: []string{"-start-embedded", "-proxy", "-proxy-url", "http://p/mcp"}, wantErr: "-proxy-url needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("EDGES", "")
			fs, o := latencyFlags()
			fs.SetOutput(io.Discard)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			callArgs, err := o.check(fs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("check = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if got := o.config(callArgs).Proxy; !reflect.DeepEqual(got, tc.wantProxy) {
				t.Errorf("config().Proxy = %+v, want %+v", got, tc.wantProxy)
			}
		})
	}
}
