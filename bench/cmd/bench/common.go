package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/switchyard-mcp/switchyard/bench/internal/launch"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
)

// endpointFlags are the flags "latency" and "sweep" share: what to measure,
// or how to start it.
type endpointFlags struct {
	gateway, direct string
	tool, gwTool    string
	args            string
	protocol        string
	mode            string
	startEmbedded   bool
	switchyard      string
}

func (f *endpointFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.gateway, "gateway", "", "MCP endpoint through Switchyard, e.g. http://127.0.0.1:8080/mcp")
	fs.StringVar(&f.direct, "direct", "", "the same upstream's MCP endpoint, directly")
	fs.StringVar(&f.tool, "tool", "echo", "tool called on the direct side")
	fs.StringVar(&f.gwTool, "gw-tool", "fixture__echo", "tool called through the gateway (its federated name)")
	fs.StringVar(&f.args, "args", `{"text":"hi"}`, "tool arguments, a JSON object")
	fs.StringVar(&f.protocol, "protocol", session.Protocol2025, "protocol version the sessions ask for: "+session.Protocol2025+" or "+session.Protocol2026)
	fs.StringVar(&f.mode, "mode", "embedded", "label for the gateway's deployment, put in the results")
	fs.BoolVar(&f.startEmbedded, "start-embedded", false, "start a fixture upstream and 'switchyard dev' in front of it, measure them, stop them")
	fs.StringVar(&f.switchyard, "switchyard", "", "switchyard binary for -start-embedded (default: switchyard next to this binary)")
}

// check validates the flags and returns the tool arguments.
func (f *endpointFlags) check() (json.RawMessage, error) {
	var errs []error
	var obj map[string]any
	if err := json.Unmarshal([]byte(f.args), &obj); err != nil || obj == nil {
		errs = append(errs, fmt.Errorf("-args must be a JSON object: %q", f.args))
	}
	if f.protocol != session.Protocol2025 && f.protocol != session.Protocol2026 {
		errs = append(errs, fmt.Errorf("-protocol must be %s or %s, got %q", session.Protocol2025, session.Protocol2026, f.protocol))
	}
	switch {
	case f.startEmbedded && (f.gateway != "" || f.direct != ""):
		errs = append(errs, errors.New("use either -start-embedded or -gateway/-direct"))
	case !f.startEmbedded && (f.gateway == "" || f.direct == ""):
		errs = append(errs, errors.New("need -gateway and -direct, or -start-embedded"))
	}
	return json.RawMessage(f.args), errors.Join(errs...)
}

// launchOptions returns the options to start u fixtures with t extra tools
// each behind a gateway.
func (f *endpointFlags) launchOptions(u, t int) (launch.Options, error) {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	sy := f.switchyard
	if sy == "" {
		sy = filepath.Join(filepath.Dir(self), "switchyard")
	}
	if _, err := os.Stat(sy); err != nil {
		return launch.Options{}, fmt.Errorf("switchyard binary: %w (build it with 'make build' or pass -switchyard)", err)
	}
	return launch.Options{BenchBin: self, SwitchyardBin: sy, Upstreams: u, ExtraTools: t, Protocol: f.protocol}, nil
}

// launchEmbedded starts u fixtures with t extra tools behind a gateway and
// says so on stderr.
func (f *endpointFlags) launchEmbedded(ctx context.Context, u, t int) (*launch.Embedded, error) {
	o, err := f.launchOptions(u, t)
	if err != nil {
		return nil, err
	}
	e, err := launch.StartEmbedded(ctx, o)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "started %d fixture upstream(s) (-tools %d; first %s, pid %d) behind switchyard %s (pid %d, GOGC=%s)\n",
		u, t, e.FixtureURLs[0], e.Fixtures[0].PID(), e.Gateway.URL, e.Gateway.PID(), e.Gateway.GOGC)
	return e, nil
}

// stop stops e, reporting a failure on stderr.
func stop(e *launch.Embedded) error {
	err := e.Stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stopping:", err)
	}
	return err
}
