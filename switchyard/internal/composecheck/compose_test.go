package composecheck

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/config"
)

const (
	configName   = "switchyard"                      // top-level configs: entry
	configTarget = "/etc/switchyard/switchyard.yaml" // where every role reads it
	natsURL      = "tls://nats:4222"
	edgePort     = 8080
)

// roles are the gateway role services; they run `/switchyard <role>`.
var roles = []string{"tenancy-svc", "router", "upstream-worker", "edge"}

// services are every service `docker compose up` starts, and only those.
var services = []string{"nats", "tenancy-svc", "router", "upstream-worker", "edge", "fixture"}

// Behind a profile: the latency gate against this deployment, run with
// `docker compose --profile bench run --rm bench`.
const (
	benchService = "bench"
	benchProfile = "bench"
)

// allServices are services plus the ones behind profiles.
var allServices = append(slices.Clone(services), benchService)

// repoRoot is the repository root, where compose.yaml and Dockerfile live.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// load parses compose text with the compose-spec loader, as `docker compose`
// does: schema validation, interpolation (with an empty environment, so the
// result does not depend on the caller's), normalization and the
// consistency checks (references to services, configs, volumes).
// profiles are the profiles to enable, as `--profile` does.
func load(t *testing.T, root string, text []byte, profiles ...string) (*types.Project, error) {
	t.Helper()
	return loader.LoadWithContext(t.Context(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "compose.yaml"), Content: text}},
		Environment: types.Mapping{},
	}, loader.WithProfiles(profiles))
}

// composeText is the repository's compose.yaml.
func composeText(t *testing.T) (root string, text []byte) {
	t.Helper()
	root = repoRoot(t)
	text, err := os.ReadFile(filepath.Join(root, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return root, text
}

// project is the repository's compose.yaml, loaded with profiles enabled.
func project(t *testing.T, profiles ...string) *types.Project {
	t.Helper()
	root, text := composeText(t)
	p, err := load(t, root, text, profiles...)
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func env(s types.ServiceConfig, key string) string {
	if v := s.Environment[key]; v != nil {
		return *v
	}
	return ""
}

// roleFlags parses a role's command line (after `/switchyard <role>`) with
// the roles' own flag set, so a misspelt or removed flag fails here.
func roleFlags(t *testing.T, s types.ServiceConfig) app.Flags {
	t.Helper()
	cmd := []string(s.Command)
	if len(cmd) < 2 || cmd[0] != "/switchyard" || cmd[1] != s.Name {
		t.Fatalf("%s: command %q, want [/switchyard %s ...]", s.Name, cmd, s.Name)
	}
	var f app.Flags
	fs := flag.NewFlagSet(s.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Register(fs)
	if err := fs.Parse(cmd[2:]); err != nil {
		t.Fatalf("%s: command %q: %v", s.Name, cmd, err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("%s: command %q: unexpected arguments %q", s.Name, cmd, fs.Args())
	}
	return f
}

// flagValue returns the value following name in args ("" if absent).
func flagValue(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func TestComposeServices(t *testing.T) {
	got := project(t).ServiceNames()
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(services)); !slices.Equal(got, want) {
		t.Fatalf("services without a profile %q, want %q", got, want)
	}
	p := project(t, benchProfile)
	root := repoRoot(t)
	got = p.ServiceNames()
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(allServices)); !slices.Equal(got, want) {
		t.Fatalf("services with --profile %s %q, want %q", benchProfile, got, want)
	}
	goGC := regexp.MustCompile(`^([0-9]+|off)$`)
	goMemLimit := regexp.MustCompile(`^[0-9]+(B|KiB|MiB|GiB|TiB)?$`)
	image := ""
	for _, name := range allServices {
		s := service(t, p, name)
		// Every service is built from the repository's Dockerfile, as one image.
		if s.Build == nil {
			t.Errorf("%s: no build section", name)
		} else {
			if s.Build.Context != root {
				t.Errorf("%s: build context %q, want the repository root %q", name, s.Build.Context, root)
			}
			if s.Build.Dockerfile != "Dockerfile" {
				t.Errorf("%s: build dockerfile %q, want Dockerfile", name, s.Build.Dockerfile)
			}
			if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if image == "" {
			image = s.Image
		}
		if s.Image == "" || s.Image != image {
			t.Errorf("%s: image %q, want one image for all services (%q)", name, s.Image, image)
		}
		wantRestart := types.RestartPolicyUnlessStopped
		if name == benchService {
			wantRestart = types.RestartPolicyNo // a one-shot run
		}
		if s.Restart != wantRestart {
			t.Errorf("%s: restart %q, want %s", name, s.Restart, wantRestart)
		}
		// Every process is a Go program with its runtime knobs set explicitly.
		if v := env(s, "GOGC"); !goGC.MatchString(v) {
			t.Errorf("%s: GOGC %q, want a number or off", name, v)
		}
		if v := env(s, "GOMEMLIMIT"); !goMemLimit.MatchString(v) {
			t.Errorf("%s: GOMEMLIMIT %q, want e.g. 512MiB", name, v)
		}
		if len(s.Command) == 0 || (s.Command[0] != "/switchyard" && s.Command[0] != "/bench") {
			t.Errorf("%s: command %q, want /switchyard or /bench (the image is scratch)", name, s.Command)
		}
	}
}

func TestComposeRoles(t *testing.T) {
	p := project(t)
	if _, ok := p.Configs[configName]; !ok {
		t.Fatalf("no top-level config %q", configName)
	}
	for _, name := range roles {
		t.Run(name, func(t *testing.T) {
			s := service(t, p, name)
			f := roleFlags(t, s)
			if f.Config != configTarget {
				t.Errorf("--config %q, want %q", f.Config, configTarget)
			}
			if flagValue(s.Command, "--log-format") != "json" {
				t.Errorf("command %q: want --log-format json", s.Command)
			}
			if f.ID != "" || env(s, "SWITCHYARD_EDGE_ID") != "" || env(s, "SWITCHYARD_WORKER_ID") != "" {
				t.Errorf("a fixed id (--id %q): replicas would clash", f.ID)
			}
			if v := env(s, "SWITCHYARD_NATS"); v != natsURL {
				t.Errorf("SWITCHYARD_NATS %q, want %q", v, natsURL)
			}
			// Every role serves its admin listener (docs/observability.md)
			// and is health-checked on a /readyz.
			if env(s, "SWITCHYARD_ADMIN") == "" {
				t.Error("no SWITCHYARD_ADMIN: the role serves no /metrics or /readyz")
			}
			if hc := s.HealthCheck; hc == nil || hc.Disable || len(hc.Test) != 4 || hc.Test[2] != "probe" || !strings.HasSuffix(hc.Test[3], "/readyz") {
				t.Errorf("healthcheck %+v, want [CMD /switchyard probe http://…/readyz]", hc)
			}
			mounted := slices.ContainsFunc(s.Configs, func(c types.ServiceConfigObjConfig) bool {
				return c.Source == configName && c.Target == configTarget
			})
			if !mounted {
				t.Errorf("configs %+v: want %s mounted at %s", s.Configs, configName, configTarget)
			}
			if _, ok := s.DependsOn["nats"]; !ok {
				t.Errorf("depends_on %q: want nats", slices.Sorted(maps.Keys(s.DependsOn)))
			}
		})
	}
}

func TestComposeEdge(t *testing.T) {
	s := service(t, project(t), "edge")
	if len(s.Ports) != 1 || s.Ports[0].Target != edgePort || s.Ports[0].Published != strconv.Itoa(edgePort) {
		t.Errorf("ports %+v, want %d published as %d", s.Ports, edgePort, edgePort)
	}
	hc := s.HealthCheck
	if hc == nil || hc.Disable || len(hc.Test) != 4 {
		t.Fatalf("healthcheck %+v, want [CMD /switchyard probe URL]", hc)
	}
	if !slices.Equal(hc.Test[:3], []string{"CMD", "/switchyard", "probe"}) {
		t.Errorf("healthcheck test %q, want [CMD /switchyard probe URL]", hc.Test)
	}
	u, err := url.Parse(hc.Test[3])
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "http" || u.Port() != strconv.Itoa(edgePort) || (u.Path != "/readyz" && u.Path != "/healthz") {
		t.Errorf("healthcheck probes %q, want http://127.0.0.1:%d/readyz", u, edgePort)
	}
}

// probeCommand checks a health check test is one of the image's probes,
// run without a shell (the image is scratch), and returns the URL it probes:
// [CMD /switchyard probe URL] (up on a 2xx) or [CMD /bench probe -url URL]
// (up on any HTTP answer below 500, or a NATS server's INFO greeting).
func probeCommand(hc *types.HealthCheckConfig) (string, error) {
	if hc == nil || hc.Disable {
		return "", fmt.Errorf("no health check")
	}
	test := []string(hc.Test)
	switch {
	case len(test) == 4 && slices.Equal(test[:3], []string{"CMD", "/switchyard", "probe"}):
		return test[3], nil
	case len(test) == 5 && slices.Equal(test[:4], []string{"CMD", "/bench", "probe", "-url"}):
		return test[4], nil
	}
	return "", fmt.Errorf("health check test %q, want [CMD /switchyard probe URL] or [CMD /bench probe -url URL] (no shell in a scratch image)", test)
}

// TestComposeHealthChecks requires a health check on every long-running
// service (all but the one-shot bench run), run as one of the image's
// probes, and a service_healthy condition on every dependency on nats or
// the fixture, whose health checks say when they accept clients.
func TestComposeHealthChecks(t *testing.T) {
	p := project(t, benchProfile)
	for _, name := range services {
		s := service(t, p, name)
		if _, err := probeCommand(s.HealthCheck); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		hc := s.HealthCheck
		if hc.Interval == nil || hc.Timeout == nil || hc.Retries == nil {
			t.Errorf("%s: health check interval %v, timeout %v, retries %v: set each", name, hc.Interval, hc.Timeout, hc.Retries)
		}
	}
	for _, name := range allServices {
		for dep, d := range service(t, p, name).DependsOn {
			if (dep == "nats" || dep == "fixture") && d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s: depends_on %s: condition %q, want %s", name, dep, d.Condition, types.ServiceConditionHealthy)
			}
		}
	}
}

func TestComposeUpstreamWorkerScales(t *testing.T) {
	s := service(t, project(t), "upstream-worker")
	if s.ContainerName != "" {
		t.Errorf("container_name %q: replicas need generated names", s.ContainerName)
	}
	if len(s.Ports) != 0 {
		t.Errorf("ports %+v: replicas cannot share fixed host ports", s.Ports)
	}
	if s.Hostname != "" {
		t.Errorf("hostname %q: replicas would share it", s.Hostname)
	}
	if f := roleFlags(t, s); f.ID != "" {
		t.Errorf("--id %q: replicas would clash", f.ID)
	}
}

func TestComposeNATSAndFixture(t *testing.T) {
	p := project(t)
	nats := service(t, p, "nats")
	if !slices.Equal(nats.Command[:2], []string{"/switchyard", "nats"}) {
		t.Errorf("nats: command %q, want /switchyard nats ...", nats.Command)
	}
	u, err := url.Parse(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, port, _ := net.SplitHostPort(flagValue(nats.Command, "--addr")); port != u.Port() {
		t.Errorf("nats: --addr %q, want port %s (%s)", flagValue(nats.Command, "--addr"), u.Port(), natsURL)
	}
	store := flagValue(nats.Command, "--store")
	persisted := slices.ContainsFunc(nats.Volumes, func(v types.ServiceVolumeConfig) bool {
		_, declared := p.Volumes[v.Source]
		return v.Type == types.VolumeTypeVolume && v.Target == store && declared
	})
	if store == "" || !persisted {
		t.Errorf("nats: --store %q, volumes %+v: want the store on a named volume", store, nats.Volumes)
	}
	// NATS has no HTTP monitor here: the check is the protocol greeting,
	// from inside the container, on the port it listens on.
	if raw, err := probeCommand(nats.HealthCheck); err != nil {
		t.Errorf("nats: %v", err)
	} else if hu, err := url.Parse(raw); err != nil || hu.Scheme != "nats" || hu.Hostname() != "127.0.0.1" || hu.Port() != u.Port() || nats.HealthCheck.Test[1] != "/bench" {
		t.Errorf("nats: health check %q, want [CMD /bench probe -url nats://127.0.0.1:%s]", nats.HealthCheck.Test, u.Port())
	}

	fixture := service(t, p, "fixture")
	if !slices.Equal(fixture.Command[:2], []string{"/bench", "fixture"}) {
		t.Errorf("fixture: command %q, want /bench fixture ...", fixture.Command)
	}
	_, port, err := net.SplitHostPort(flagValue(fixture.Command, "-http"))
	if err != nil {
		t.Fatalf("fixture: command %q, want -http ADDR: %v", fixture.Command, err)
	}
	// A bare GET on a streamable HTTP MCP endpoint is a 4xx: `/switchyard
	// probe` (2xx only) would keep the fixture unhealthy; `/bench probe`
	// takes any answer below 500.
	if raw, err := probeCommand(fixture.HealthCheck); err != nil {
		t.Errorf("fixture: %v", err)
	} else if hu, err := url.Parse(raw); err != nil || hu.Scheme != "http" || hu.Hostname() != "127.0.0.1" || hu.Port() != port || hu.Path != "/mcp" || fixture.HealthCheck.Test[1] != "/bench" {
		t.Errorf("fixture: health check %q, want [CMD /bench probe -url http://127.0.0.1:%s/mcp]", fixture.HealthCheck.Test, port)
	}
}

// TestComposeBench checks the bench service: the latency gate run against
// this deployment on demand. The bench module's own test
// (bench/cmd/bench, TestComposeBenchCommand) parses its command with the
// real "bench latency" flag set; this checks it fits the rest of the file.
func TestComposeBench(t *testing.T) {
	p := project(t, benchProfile)
	s := service(t, p, benchService)
	if !slices.Equal(s.Profiles, []string{benchProfile}) {
		t.Errorf("profiles %q, want [%s] (so `docker compose up` leaves it out)", s.Profiles, benchProfile)
	}
	cmd := []string(s.Command)
	if len(cmd) < 2 || !slices.Equal(cmd[:2], []string{"/bench", "latency"}) {
		t.Fatalf("command %q, want /bench latency ...", cmd)
	}
	args := cmd[2:]
	for _, f := range []string{"-start-embedded", "-start-cluster", "-switchyard"} {
		if slices.Contains(args, f) {
			t.Errorf("command %q: %s starts a gateway of its own; want the compose one", cmd, f)
		}
	}
	// Every flag is followed by its value: "-name value" pairs.
	if len(args)%2 != 0 {
		t.Fatalf("command %q: want -flag value pairs", cmd)
	}
	for i := 0; i < len(args); i += 2 {
		if !strings.HasPrefix(args[i], "-") || strings.HasPrefix(args[i+1], "-") {
			t.Errorf("command %q: %q %q is not -flag value", cmd, args[i], args[i+1])
		}
	}

	// -gateway is the edge, at the port it listens on.
	gw := flagValue(args, "-gateway")
	if gw == "" {
		gw = flagValue(args, "-gateway-url")
	}
	if u, err := url.Parse(gw); err != nil || u.Scheme != "http" || u.Hostname() != "edge" || u.Port() != strconv.Itoa(edgePort) || u.Path != "/mcp" {
		t.Errorf("-gateway %q, want http://edge:%d/mcp", gw, edgePort)
	}
	// -direct is the fixture, where the gateway's config says it is.
	cfg, err := config.Load(writeConfig(t, p))
	if err != nil {
		t.Fatal(err)
	}
	if d := flagValue(args, "-direct"); len(cfg.Upstreams) != 1 || d != cfg.Upstreams[0].URL {
		t.Errorf("-direct %q, want the upstream's url %+v", d, cfg.Upstreams)
	} else if u, _ := url.Parse(d); u.Hostname() != "fixture" {
		t.Errorf("-direct %q, want the fixture service", d)
	}
	// The gateway names the upstream's tools <upstream>__<tool>.
	tool, gwTool := flagValue(args, "-tool"), flagValue(args, "-gw-tool")
	if tool == "" || len(cfg.Upstreams) != 1 || gwTool != cfg.Upstreams[0].Name+"__"+tool {
		t.Errorf("-tool %q, -gw-tool %q: want the fixture's tool and its federated name %s__<tool>", tool, gwTool, "fixture")
	}
	for flag, want := range map[string]string{"-mode": "compose", "-max-added-p50": "0", "-n": "2000", "-warmup": "200"} {
		if v := flagValue(args, flag); v != want {
			t.Errorf("%s %q, want %q", flag, v, want)
		}
	}
	// -out is on a volume, so the results outlive the container.
	out := flagValue(args, "-out")
	mounted := slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Target == out && (v.Type == types.VolumeTypeBind || v.Type == types.VolumeTypeVolume)
	})
	if !strings.HasPrefix(out, "/") || !mounted {
		t.Errorf("-out %q, volumes %+v: want the results directory on a volume or bind mount", out, s.Volumes)
	}

	for dep, want := range map[string]string{"edge": types.ServiceConditionHealthy, "fixture": types.ServiceConditionHealthy} {
		if d, ok := s.DependsOn[dep]; !ok || d.Condition != want {
			t.Errorf("depends_on %s: %+v, want condition %s", dep, d, want)
		}
	}
	if len(s.Ports) != 0 {
		t.Errorf("ports %+v: the bench is a client", s.Ports)
	}
}

// writeConfig writes the inline switchyard config to a temporary file and
// returns its path.
func writeConfig(t *testing.T, p *types.Project) string {
	t.Helper()
	cfg, ok := p.Configs[configName]
	if !ok || cfg.Content == "" {
		t.Fatalf("configs.%s: want inline content", configName)
	}
	path := filepath.Join(t.TempDir(), "switchyard.yaml")
	if err := os.WriteFile(path, []byte(cfg.Content), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"SWITCHYARD_CONFIG", "SWITCHYARD_NATS", "SWITCHYARD_LISTEN", "SWITCHYARD_EDGE_ID", "SWITCHYARD_WORKER_ID", "SWITCHYARD_WORKER_UPSTREAMS"} {
		t.Setenv(k, "") // unset for config.Load, which ignores empty values
	}
	return path
}

// TestComposeDependsOn checks conditions both as written (the loader fills
// in service_started when none is given) and as loaded.
func TestComposeDependsOn(t *testing.T) {
	root, text := composeText(t)
	var raw struct {
		Services map[string]struct {
			DependsOn any `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(text, &raw); err != nil {
		t.Fatal(err)
	}
	for name, s := range raw.Services {
		if s.DependsOn == nil {
			continue
		}
		deps, ok := s.DependsOn.(map[string]any)
		if !ok {
			t.Errorf("%s: depends_on is a list; want a mapping with a condition per service", name)
			continue
		}
		for dep, v := range deps {
			d, _ := v.(map[string]any)
			if c, _ := d["condition"].(string); c == "" {
				t.Errorf("%s: depends_on %s has no condition", name, dep)
			}
		}
	}

	p, err := load(t, root, text, benchProfile)
	if err != nil {
		t.Fatal(err)
	}
	if len(service(t, p, "edge").DependsOn) == 0 {
		t.Error("edge: no depends_on")
	}
	for _, name := range allServices {
		for dep, d := range service(t, p, name).DependsOn {
			target := service(t, p, dep)
			switch d.Condition {
			case types.ServiceConditionStarted:
			case types.ServiceConditionHealthy:
				if target.HealthCheck == nil || target.HealthCheck.Disable {
					t.Errorf("%s: depends_on %s: service_healthy, but %s has no health check", name, dep, dep)
				}
			default:
				t.Errorf("%s: depends_on %s: condition %q, want service_started or service_healthy", name, dep, d.Condition)
			}
		}
	}
}

// TestComposeConfig loads the inline config with Switchyard's own loader,
// then as each role would see it in its container (flags and environment).
func TestComposeConfig(t *testing.T) {
	p := project(t)
	cfg, ok := p.Configs[configName]
	if !ok || cfg.Content == "" {
		t.Fatalf("configs.%s: want inline content", configName)
	}
	path := filepath.Join(t.TempDir(), "switchyard.yaml")
	if err := os.WriteFile(path, []byte(cfg.Content), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"SWITCHYARD_CONFIG", "SWITCHYARD_NATS", "SWITCHYARD_LISTEN", "SWITCHYARD_EDGE_ID", "SWITCHYARD_WORKER_ID", "SWITCHYARD_WORKER_UPSTREAMS"} {
		t.Setenv(k, "") // unset for config.Load, which ignores empty values
	}

	f, err := config.Load(path)
	if err != nil {
		t.Fatalf("inline config: %v", err)
	}
	if len(f.Upstreams) != 1 || f.Upstreams[0].Name != "fixture" {
		t.Fatalf("upstreams %+v, want one named fixture", f.Upstreams)
	}
	// The upstream is the fixture service, at the address it listens on.
	u, err := url.Parse(f.Upstreams[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	fixture := service(t, p, "fixture")
	_, port, err := net.SplitHostPort(flagValue(fixture.Command, "-http"))
	if err != nil {
		t.Fatalf("fixture -http: %v", err)
	}
	if u.Scheme != "http" || u.Hostname() != fixture.Name || u.Port() != port || u.Path != "/mcp" {
		t.Errorf("upstream url %q, want http://%s:%s/mcp", u, fixture.Name, port)
	}
	if f.Edge.ID != "" || f.Worker.ID != "" {
		t.Errorf("edge.id %q, worker.id %q: want random ids", f.Edge.ID, f.Worker.ID)
	}
	host, port, err := net.SplitHostPort(f.Listen)
	if err != nil || port != strconv.Itoa(edgePort) || (host != "0.0.0.0" && host != "") {
		t.Errorf("listen %q, want 0.0.0.0:%d (reachable from outside the container)", f.Listen, edgePort)
	}

	for _, name := range roles {
		t.Run(name, func(t *testing.T) {
			s := service(t, p, name)
			for k, v := range s.Environment {
				if strings.HasPrefix(k, "SWITCHYARD_") && v != nil {
					t.Setenv(k, *v)
				}
			}
			fl := roleFlags(t, s)
			fl.Config = path // stands for the mount at configTarget
			c, err := fl.Load()
			if err != nil {
				t.Fatalf("config as %s loads it: %v", name, err)
			}
			if c.NATS.URL != natsURL {
				t.Errorf("nats %q, want %q", c.NATS.URL, natsURL)
			}
			if name == "edge" && c.Listen != f.Listen {
				t.Errorf("edge listens on %q, want %q", c.Listen, f.Listen)
			}
		})
	}
}

// TestComposeRejectsBroken shows the loader used above does fail: on broken
// texts, and on the real compose.yaml with one mistake put in.
func TestComposeRejectsBroken(t *testing.T) {
	root, real := composeText(t)
	const minimal = `
name: composecheck
services:
  a:
    image: x
    command: ["/switchyard", "help"]
`
	// mutate returns the real compose.yaml with the first old replaced by repl.
	mutate := func(old, repl string) string {
		s := string(real)
		if !strings.Contains(s, old) {
			t.Fatalf("compose.yaml no longer contains %q; update this test", old)
		}
		return strings.Replace(s, old, repl, 1)
	}
	cases := []struct {
		name    string
		text    string
		wantErr string // "" means it must load
	}{
		{"minimal valid", minimal, ""},
		{"real compose.yaml", string(real), ""},
		{"depends_on a missing service", minimal + `
    depends_on:
      b:
        condition: service_started
`, `undefined service "b"`},
		{"unknown depends_on condition", minimal + `
    depends_on:
      a2:
        condition: service_ready
  a2:
    image: x
`, "condition value must be one of"},
		{"undefined config", minimal + `
    configs:
      - source: nope
        target: /etc/x
`, "undefined config nope"},
		{"misspelt key", minimal + `
    depend_on: [a2]
  a2:
    image: x
`, "depend_on"},
		{"real compose.yaml, edge depends on a missing service", mutate(
			"      router:\n        condition: service_started\n      upstream-worker:",
			"      routr:\n        condition: service_started\n      upstream-worker:"), `undefined service "routr"`},
		{"real compose.yaml, unknown condition", mutate(
			"condition: service_started", "condition: started"), "condition value must be one of"},
		{"real compose.yaml, the admin key's secret undefined", mutate(
			"\nsecrets:\n  # The admin listener's key", "\nx-secrets:\n  # The admin listener's key"), "undefined secret"},
		{"real compose.yaml, a role's NATS creds undefined", mutate(
			"  nats_creds_edge:\n    file: ./nats-auth/edge.creds\n", ""), "undefined secret nats_creds_edge"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, root, []byte(tc.text))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("loaded; want an error mentioning %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q; want it to mention %q", err, tc.wantErr)
			}
		})
	}
}
