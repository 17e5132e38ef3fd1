package composecheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The gateway's binaries are built, by `make build` and by the Dockerfile,
// with build tags that keep text/template out of them. text/template looks
// methods up by name at run time (reflect.Value.MethodByName), and a binary
// that can do so keeps every exported method of every type: the linker's
// dead-code elimination gives up on methods. gRPC (the OTLP/gRPC trace
// exporter's) brings it in through golang.org/x/net/trace and html/template
// unless built with grpcnotrace. Without it the switchyard binary was
// 49 MB instead of 42, and each process idled ~3 MiB larger (the binary's
// pages it maps; docs/benchmarks.md).

// gatewayBuilds are the module directories whose binaries `make build`
// must build with the tags: switchyard, bench and the roles.
var gatewayBuilds = []string{"switchyard", "bench", "edge", "router", "upstream-worker", "tenancy-svc"}

// goBuildCmd is one `go build` that `make -n build` prints.
type goBuildCmd struct {
	dir  string   // the directory it runs in, relative to the repository root
	pkg  string   // the package it builds (its last word)
	tags []string // its build tags
}

// forLoop matches make's shell loop over the roles.
var forLoop = regexp.MustCompile(`^for (\w+) in ([^;]*); do (.*); done$`)

// makeBuilds runs `make -n build` in the repository root and returns the
// Go builds it would run, by module directory.
func makeBuilds(t *testing.T) map[string]goBuildCmd {
	t.Helper()
	cmd := exec.Command("make", "-n", "build")
	cmd.Dir = repoRoot(t)
	// A parent make's flags (make test runs these tests) are not ours.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "MAKEFLAGS" || k == "MFLAGS" || k == "MAKELEVEL" || k == "GO"
	})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	builds := map[string]goBuildCmd{}
	for _, line := range strings.Split(string(out), "\n") {
		for _, l := range expandLoop(strings.TrimSpace(line)) {
			if b, ok := parseBuildLine(l); ok {
				builds[b.dir] = b
			}
		}
	}
	return builds
}

// expandLoop turns `for r in a b; do X $r; done` into one line per value.
func expandLoop(line string) []string {
	m := forLoop.FindStringSubmatch(line)
	if m == nil {
		return []string{line}
	}
	var out []string
	for _, v := range strings.Fields(m[2]) {
		l := strings.ReplaceAll(m[3], "$"+m[1], v)
		out = append(out, strings.ReplaceAll(l, "${"+m[1]+"}", v))
	}
	return out
}

// parseBuildLine finds a `go build` in one shell line and the `cd` before
// it.
func parseBuildLine(line string) (goBuildCmd, bool) {
	var b goBuildCmd
	for _, words := range runCommands(strings.NewReplacer("(", " ", ")", " ").Replace(line)) {
		if len(words) == 2 && words[0] == "cd" {
			b.dir = words[1]
			continue
		}
		ok, inline, args := goBuild(words)
		if !ok || len(args) == 0 {
			continue
		}
		b.pkg = args[len(args)-1]
		b.tags = buildTags(args, inline["GOFLAGS"])
		return b, true
	}
	return b, false
}

// makeBuildTags returns the build tags `make build` builds the gateway's
// binaries with, checking that they are the same for all of them.
func makeBuildTags(t *testing.T) []string {
	t.Helper()
	builds := makeBuilds(t)
	var tags []string
	for i, dir := range gatewayBuilds {
		b, ok := builds[dir]
		if !ok {
			t.Fatalf("make -n build has no go build in %s/ (found %v)", dir, builds)
		}
		if i == 0 {
			tags = b.tags
		} else if !slices.Equal(b.tags, tags) {
			t.Fatalf("make build builds %s with tags %v, %s with %v: the binaries differ", dir, b.tags, gatewayBuilds[0], tags)
		}
	}
	return tags
}

// TestBuildsLinkNoTemplates checks that every gateway binary, built as
// `make build` builds it, links neither text/template nor html/template.
func TestBuildsLinkNoTemplates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make and go list")
	}
	builds := makeBuilds(t)
	makeBuildTags(t)
	root := repoRoot(t)
	for _, dir := range gatewayBuilds {
		b := builds[dir]
		t.Run(dir, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-tags="+strings.Join(b.tags, ","), b.pkg)
			cmd.Dir = filepath.Join(root, b.dir)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %s in %s: %v", b.pkg, b.dir, err)
			}
			deps := strings.Fields(string(out))
			for _, p := range []string{"text/template", "html/template"} {
				if slices.Contains(deps, p) {
					t.Errorf("%s built with tags %v links %s: the linker then keeps every exported method (see build_test.go); find the importer with go list -deps -f '{{.ImportPath}} {{.Imports}}'",
						filepath.Join(b.dir, b.pkg), b.tags, p)
				}
			}
		})
	}
}

// TestParseBuildLine covers the shapes of make's build lines.
func TestParseBuildLine(t *testing.T) {
	cases := []struct {
		line string
		want []goBuildCmd
	}{
		{"cd switchyard && CGO_ENABLED=0 go build -tags=grpcnotrace -o /b/switchyard ./cmd/switchyard",
			[]goBuildCmd{{"switchyard", "./cmd/switchyard", []string{"grpcnotrace"}}}},
		{"cd bench && GOFLAGS=-tags=a,b go build -o /b/bench ./cmd/bench",
			[]goBuildCmd{{"bench", "./cmd/bench", []string{"a", "b"}}}},
		{"cd bench && go build -o /b/bench ./cmd/bench",
			[]goBuildCmd{{"bench", "./cmd/bench", nil}}},
		{"for r in edge router; do (cd $r && CGO_ENABLED=0 go build -tags x -o /b/$r ./cmd/$r) || exit 1; done",
			[]goBuildCmd{{"edge", "./cmd/edge", []string{"x"}}, {"router", "./cmd/router", []string{"x"}}}},
		{"mkdir -p /b", nil},
	}
	for _, tc := range cases {
		var got []goBuildCmd
		for _, l := range expandLoop(tc.line) {
			if b, ok := parseBuildLine(l); ok {
				got = append(got, b)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: got %v, want %v", tc.line, got, tc.want)
			continue
		}
		for i := range got {
			if got[i].dir != tc.want[i].dir || got[i].pkg != tc.want[i].pkg || !slices.Equal(got[i].tags, tc.want[i].tags) {
				t.Errorf("%q: got %v, want %v", tc.line, got[i], tc.want[i])
			}
		}
	}
}
