package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/internal/report"
	"github.com/switchyard-mcp/switchyard/bench/internal/session"
)

// fixtureBaseTools is the number of tools a fixture serves besides its
// extra ones (echo, fail, big, slow).
const fixtureBaseTools = 4

// FixtureTools returns the number of tools of a fixture with extra extra
// tools.
func FixtureTools(extra int) int { return fixtureBaseTools + extra }

// Options configures [Start].
type Options struct {
	// BenchBin is the bench binary (its "fixture" subcommand serves the
	// upstreams); SwitchyardBin the switchyard binary.
	BenchBin, SwitchyardBin string
	// Upstreams is the number of fixture upstreams, at least 1.
	Upstreams int
	// ExtraTools is each fixture's -tools value.
	ExtraTools int
	// Protocol is the protocol the measuring sessions will use. For
	// 2026-07-28 the fixtures serve statelessly, because the SDK's
	// stateful handler refuses that version and the direct baseline would
	// silently fall back to 2025-11-25.
	Protocol string
	// Cluster, when not nil, runs the gateway as a multi-process cluster
	// of that topology (see [StartCluster]) instead of "switchyard dev";
	// LogDir then receives its configuration and logs.
	Cluster *report.Topology
	LogDir  string
	// IdleRSSAfter is [ClusterOptions.IdleRSSAfter], for a cluster.
	IdleRSSAfter time.Duration
	// NATS is [ClusterOptions.NATS], for a cluster.
	NATS string
}

// Stack is a running set of fixture upstreams behind a gateway: either
// "switchyard dev" (Gateway) or a cluster (Cluster).
type Stack struct {
	Gateway *Gateway
	Cluster *Cluster
	// Fixtures are the upstream processes and FixtureURLs their endpoints,
	// in the order of Names.
	Fixtures    []*Process
	FixtureURLs []string
	// Names are the upstream names in the gateway ("fixture" when there is
	// one, else "fixture-1", "fixture-2", ...).
	Names []string
}

// Start starts the fixtures and the gateway and waits until the gateway
// (every edge of a cluster) lists every fixture tool. On error nothing is
// left running.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if o.Upstreams < 1 {
		return nil, fmt.Errorf("launch: need at least one upstream, got %d", o.Upstreams)
	}
	e := &Stack{}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()
	args := []string{"-tools", fmt.Sprint(o.ExtraTools)}
	if o.Protocol >= session.Protocol2026 {
		args = append(args, "-stateless")
	}
	ups := make([]Upstream, o.Upstreams)
	for i := range ups {
		ups[i].Name = "fixture"
		if o.Upstreams > 1 {
			ups[i].Name = fmt.Sprintf("fixture-%d", i+1)
		}
		p, url, err := StartFixture(ctx, ups[i].Name, o.BenchBin, slices.Concat(args, []string{"-name", ups[i].Name})...)
		if err != nil {
			return nil, err
		}
		ups[i].URL = url
		e.Fixtures, e.FixtureURLs, e.Names = append(e.Fixtures, p), append(e.FixtureURLs, url), append(e.Names, ups[i].Name)
	}
	want := o.Upstreams * FixtureTools(o.ExtraTools)
	if o.Cluster != nil {
		e.Cluster, err = StartCluster(ctx, ClusterOptions{
			SwitchyardBin: o.SwitchyardBin, Topology: *o.Cluster, Upstreams: ups,
			LogDir: o.LogDir, Protocol: o.Protocol, WantTools: want,
			IdleRSSAfter: o.IdleRSSAfter, NATS: o.NATS,
		})
		return e, err
	}
	if e.Gateway, err = StartGateway(ctx, o.SwitchyardBin, ups); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	what := fmt.Sprintf("tools/list to hold %d tools including %s__echo", want, e.Names[0])
	return e, pollProcs(ctx, what, []*Process{e.Gateway.Process}, listsTools(e.Gateway.URL, o.Protocol, e.Names, want))
}

// listsTools returns a probe that reports whether tools/list at url holds
// at least want tools including every upstream's echo.
func listsTools(url, protocol string, names []string, want int) func(context.Context) bool {
	return func(ctx context.Context) bool {
		tools, err := listOnce(ctx, url, protocol)
		if err != nil || len(tools) < want {
			return false
		}
		for _, n := range names {
			if !slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t.Name == n+"__echo" }) {
				return false
			}
		}
		return true
	}
}

func listOnce(ctx context.Context, url, protocol string) ([]*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := session.Dial(ctx, url, protocol)
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.Close() }()
	return session.Tools(ctx, s.ClientSession)
}

// URLs returns the gateway's MCP endpoints: one, or one per edge.
func (e *Stack) URLs() []string {
	if e.Cluster != nil {
		return e.Cluster.EdgeURLs
	}
	return []string{e.Gateway.URL}
}

// GatewayPIDs returns the process ids of the gateway: one, or every
// process of the cluster including NATS.
func (e *Stack) GatewayPIDs() []int {
	if e.Cluster != nil {
		return e.Cluster.PIDs()
	}
	return []int{e.Gateway.PID()}
}

// GOGC returns the GOGC value in the gateway's environment.
func (e *Stack) GOGC() string {
	if e.Cluster != nil {
		return e.Cluster.GOGC
	}
	return e.Gateway.GOGC
}

// GOMAXPROCS returns the GOMAXPROCS value in the environment of every
// gateway process.
func (e *Stack) GOMAXPROCS() string {
	if e.Cluster != nil {
		return e.Cluster.GOMAXPROCS
	}
	return e.Gateway.GOMAXPROCS
}

// IdleRSS returns the cluster's idle RSS per process, nil for "switchyard
// dev" or when not measured.
func (e *Stack) IdleRSS() *report.IdleRSS {
	if e.Cluster == nil {
		return nil
	}
	return e.Cluster.IdleRSS
}

// Topology returns the cluster's topology, nil for "switchyard dev".
func (e *Stack) Topology() *report.Topology {
	if e.Cluster == nil {
		return nil
	}
	t := e.Cluster.Topology
	return &t
}

// Describe says what runs, for messages.
func (e *Stack) Describe() string {
	s := fmt.Sprintf("%d fixture upstream(s) (first %s, pid %d) behind ", len(e.Fixtures), e.FixtureURLs[0], e.Fixtures[0].PID())
	if e.Cluster != nil {
		return s + e.Cluster.String()
	}
	return s + fmt.Sprintf("switchyard dev %s (pid %d, GOGC=%s, GOMAXPROCS=%s)", e.Gateway.URL, e.Gateway.PID(), e.Gateway.GOGC, e.Gateway.GOMAXPROCS)
}

// FixturePIDs returns the fixtures' process ids.
func (e *Stack) FixturePIDs() []int {
	pids := make([]int, len(e.Fixtures))
	for i, p := range e.Fixtures {
		pids[i] = p.PID()
	}
	return pids
}

// Stop stops the gateway, then the fixtures. It is safe to call on a
// partly started Stack and more than once.
func (e *Stack) Stop() error {
	var err error
	switch {
	case e.Cluster != nil:
		err = e.Cluster.Stop()
	case e.Gateway != nil:
		err = e.Gateway.Stop()
	}
	return errors.Join(err, stopAll(e.Fixtures...))
}
