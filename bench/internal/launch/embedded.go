package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/bench/internal/session"
)

// fixtureBaseTools is the number of tools a fixture serves besides its
// extra ones (echo, fail, big, slow).
const fixtureBaseTools = 4

// Options configures [StartEmbedded].
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
}

// Embedded is a running set of fixture upstreams behind a gateway.
type Embedded struct {
	Gateway *Gateway
	// Fixtures are the upstream processes and FixtureURLs their endpoints,
	// in the order of Names.
	Fixtures    []*Process
	FixtureURLs []string
	// Names are the upstream names in the gateway ("fixture" when there is
	// one, else "fixture-1", "fixture-2", ...).
	Names []string
}

// StartEmbedded starts the fixtures and the gateway and waits until the
// gateway lists every fixture tool. On error nothing is left running.
func StartEmbedded(ctx context.Context, o Options) (_ *Embedded, err error) {
	if o.Upstreams < 1 {
		return nil, fmt.Errorf("launch: need at least one upstream, got %d", o.Upstreams)
	}
	e := &Embedded{}
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
	if e.Gateway, err = StartGateway(ctx, o.SwitchyardBin, ups); err != nil {
		return nil, err
	}
	want := o.Upstreams * (fixtureBaseTools + o.ExtraTools)
	return e, e.waitTools(ctx, o.Protocol, want)
}

// waitTools waits until tools/list through the gateway holds want tools
// including every upstream's echo.
func (e *Embedded) waitTools(ctx context.Context, protocol string, want int) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	what := fmt.Sprintf("tools/list to hold %d tools including %s__echo", want, e.Names[0])
	return e.Gateway.poll(ctx, what, func(ctx context.Context) bool {
		tools, err := listOnce(ctx, e.Gateway.URL, protocol)
		if err != nil || len(tools) < want {
			return false
		}
		for _, n := range e.Names {
			if !slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t.Name == n+"__echo" }) {
				return false
			}
		}
		return true
	})
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

// FixturePIDs returns the fixtures' process ids.
func (e *Embedded) FixturePIDs() []int {
	pids := make([]int, len(e.Fixtures))
	for i, p := range e.Fixtures {
		pids[i] = p.PID()
	}
	return pids
}

// Stop stops the gateway, then the fixtures. It is safe to call on a
// partly started Embedded and more than once.
func (e *Embedded) Stop() error {
	var err error
	if e.Gateway != nil {
		err = e.Gateway.Stop()
	}
	return errors.Join(err, stopAll(e.Fixtures...))
}
