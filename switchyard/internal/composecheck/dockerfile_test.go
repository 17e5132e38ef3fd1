package composecheck

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Dockerfile is checked as text, simply: it is one file of a known
// shape, and a full Dockerfile parser would be a dependency for two facts
// (the final stage is scratch; every Go build in a build stage is static).

// instruction is one logical Dockerfile instruction: continuation lines
// joined, comments dropped.
type instruction struct {
	line int    // 1-based line of its first physical line
	cmd  string // upper-cased keyword: FROM, RUN, ENV, ...
	args string // the rest, continuations joined with a space
}

// instructions splits a Dockerfile into logical instructions. Heredocs are
// not supported (this repository's Dockerfile has none; checkDockerfile
// reports a Go build it could not attribute to an instruction).
func instructions(text string) []instruction {
	var out []instruction
	var cur *instruction
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "#") || (line == "" && cur == nil) {
			continue // comments may sit between continuation lines, too
		}
		cont := strings.HasSuffix(line, `\`)
		line = strings.TrimSuffix(line, `\`)
		if cur == nil {
			kw, rest, _ := strings.Cut(line, " ")
			cur = &instruction{line: i + 1, cmd: strings.ToUpper(kw), args: strings.TrimSpace(rest)}
		} else if line != "" {
			cur.args += " " + line
		}
		if !cont {
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// envAssignments parses an ENV instruction's arguments: KEY=VALUE pairs
// (quotes stripped), or the legacy `ENV KEY VALUE` form.
func envAssignments(args string) map[string]string {
	fields := strings.Fields(args)
	m := map[string]string{}
	if len(fields) > 0 && !strings.Contains(fields[0], "=") {
		m[fields[0]] = strings.Trim(strings.Join(fields[1:], " "), `"'`)
		return m
	}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = strings.Trim(v, `"'`)
		}
	}
	return m
}

var (
	// goBuildAnywhere finds a Go build or install anywhere in a text.
	goBuildAnywhere = regexp.MustCompile(`\bgo"?\s*,?\s*"?(build|install)\b`)
	// shellSeparators split a shell line into simple commands.
	shellSeparators = regexp.MustCompile(`&&|\|\||[;|]`)
	assignment      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// runCommands returns a RUN instruction's simple commands as words: the
// exec form (a JSON array) is one command; the shell form is split at
// ; && || and |, with RUN's own --flags dropped.
func runCommands(args string) [][]string {
	if strings.HasPrefix(args, "[") {
		var argv []string
		if json.Unmarshal([]byte(args), &argv) == nil {
			return [][]string{argv}
		}
	}
	var out [][]string
	for _, part := range shellSeparators.Split(args, -1) {
		words := strings.Fields(part)
		for len(out) == 0 && len(words) > 0 && strings.HasPrefix(words[0], "--") {
			words = words[1:] // --mount=..., --network=...: flags of RUN, not the shell
		}
		out = append(out, words)
	}
	return out
}

// goBuild reports whether words run `go build` or `go install`, the
// environment assignments written before it on the same command (inline
// `CGO_ENABLED=0 go build` or `env CGO_ENABLED=0 go build`), and the words
// after `build`/`install` (flags and packages).
func goBuild(words []string) (isBuild bool, inline map[string]string, args []string) {
	inline = map[string]string{}
	i := 0
	if i < len(words) && words[i] == "env" {
		i++
	}
	for ; i < len(words) && assignment.MatchString(words[i]); i++ {
		k, v, _ := strings.Cut(words[i], "=")
		inline[k] = strings.Trim(v, `"'`)
	}
	if i+1 < len(words) && (words[i] == "go" || strings.HasSuffix(words[i], "/go")) && (words[i+1] == "build" || words[i+1] == "install") {
		return true, inline, words[i+2:]
	}
	return false, nil, nil
}

// buildTags returns the build tags of a go command: its -tags flag
// (-tags=a,b or -tags a,b; the last one wins, as with the go command's
// flags), else GOFLAGS's.
func buildTags(args []string, goflags string) []string {
	tags, set := tagsFlag(args)
	if !set {
		tags, _ = tagsFlag(strings.Fields(goflags))
	}
	return tags
}

// tagsFlag finds -tags (or --tags) in command-line words.
func tagsFlag(words []string) (tags []string, set bool) {
	for i := 0; i < len(words); i++ {
		if !strings.HasPrefix(words[i], "-") {
			continue
		}
		w := strings.TrimPrefix(strings.TrimPrefix(words[i], "-"), "-")
		switch {
		case strings.HasPrefix(w, "tags="):
			tags, set = splitTags(strings.TrimPrefix(w, "tags=")), true
		case w == "tags" && i+1 < len(words):
			i++
			tags, set = splitTags(words[i]), true
		}
	}
	return tags, set
}

// splitTags splits a -tags value: comma-separated (or, in the old form,
// space-separated) tags.
func splitTags(v string) []string {
	return strings.FieldsFunc(strings.Trim(v, `"'`), func(r rune) bool { return r == ',' || r == ' ' })
}

// checkDockerfile returns what is wrong with a Dockerfile's text for the
// compose images: the final stage must be FROM scratch (nothing to pull at
// run time, no shell), and every `go build`/`go install` in a build stage
// must run with CGO_ENABLED=0 (a static binary: scratch has no libc), set
// by an ENV of that stage (or of a stage it is built FROM) or inline on the
// command, and with each of the build tags in tags (its -tags flag, or
// GOFLAGS's). It needs at least one Go build.
func checkDockerfile(text string, tags ...string) []string {
	var problems []string
	type stage struct {
		base string            // the FROM image (or earlier stage)
		name string            // its AS name, if any
		env  map[string]string // ENV in effect
	}
	var stages []stage
	builds, seen := 0, 0
	for _, in := range instructions(text) {
		switch in.cmd {
		case "FROM":
			words := slices.DeleteFunc(strings.Fields(in.args), func(w string) bool { return strings.HasPrefix(w, "--") })
			if len(words) == 0 {
				problems = append(problems, fmt.Sprintf("line %d: FROM without an image", in.line))
				continue
			}
			st := stage{base: words[0], env: map[string]string{}}
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				st.name = words[2]
			}
			// FROM an earlier stage inherits its environment.
			for _, prev := range stages {
				if prev.name != "" && prev.name == st.base {
					maps.Copy(st.env, prev.env)
				}
			}
			stages = append(stages, st)
		case "ENV":
			if len(stages) == 0 {
				continue
			}
			for k, v := range envAssignments(in.args) {
				stages[len(stages)-1].env[k] = v
			}
		case "RUN":
			n := len(goBuildAnywhere.FindAllString(in.args, -1))
			seen += n
			if len(stages) == 0 {
				continue
			}
			env := stages[len(stages)-1].env
			for _, words := range runCommands(in.args) {
				ok, inline, args := goBuild(words)
				if !ok {
					continue
				}
				builds++
				cgo, set := inline["CGO_ENABLED"]
				if !set {
					cgo, set = env["CGO_ENABLED"]
				}
				if !set || cgo != "0" {
					problems = append(problems, fmt.Sprintf("line %d: %q runs without CGO_ENABLED=0 (ENV or inline): not a static binary",
						in.line, strings.Join(words, " ")))
				}
				goflags, set := inline["GOFLAGS"]
				if !set {
					goflags = env["GOFLAGS"]
				}
				have := buildTags(args, goflags)
				for _, tag := range tags {
					if !slices.Contains(have, tag) {
						problems = append(problems, fmt.Sprintf("line %d: %q builds without the tag %s (-tags or GOFLAGS) that make build uses",
							in.line, strings.Join(words, " "), tag))
					}
				}
			}
		}
	}
	switch {
	case len(stages) == 0:
		problems = append(problems, "no FROM")
	case stages[len(stages)-1].base != "scratch":
		problems = append(problems, "the final stage is not FROM scratch")
	}
	if builds == 0 {
		problems = append(problems, "no go build or go install in a RUN")
	}
	if seen != builds {
		problems = append(problems, fmt.Sprintf("%d Go builds in RUN text, %d understood as commands: write each as `[VAR=v ...] go build ...`", seen, builds))
	}
	return problems
}

func dockerfileText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDockerfileStaticScratch checks the repository's Dockerfile: the image
// every compose service runs is FROM scratch, with static Go binaries built
// with the build tags of `make build`.
func TestDockerfileStaticScratch(t *testing.T) {
	tags := makeBuildTags(t)
	if problems := checkDockerfile(dockerfileText(t), tags...); len(problems) > 0 {
		t.Errorf("Dockerfile:\n  %s", strings.Join(problems, "\n  "))
	}
}

// TestDockerfileCheckRejects shows checkDockerfile does fail: on the real
// Dockerfile with one mistake put in, and on small texts.
func TestDockerfileCheckRejects(t *testing.T) {
	real := dockerfileText(t)
	mutate := func(old, repl string) string {
		if !strings.Contains(real, old) {
			t.Fatalf("Dockerfile no longer contains %q; update this test", old)
		}
		return strings.Replace(real, old, repl, 1)
	}
	const static = "FROM golang AS build\nENV CGO_ENABLED=0\nRUN go build -o /x ./cmd/x\nFROM scratch\nCOPY --from=build /x /x\n"
	cases := []struct {
		name string
		text string
		want string   // "" means no problem
		tags []string // the build tags every build must have
	}{
		{"real Dockerfile", real, "", nil},
		{"small static", static, "", nil},
		{"inline", "FROM golang AS build\nRUN cd /src && CGO_ENABLED=0 go build -o /x .\nFROM scratch\n", "", nil},
		{"inline with env", "FROM golang AS build\nRUN env CGO_ENABLED=0 GOOS=linux go install ./cmd/x\nFROM scratch\n", "", nil},
		{"legacy ENV form", "FROM golang AS build\nENV CGO_ENABLED 0\nRUN go build .\nFROM scratch\n", "", nil},
		{"inherited from a named stage", "FROM golang AS base\nENV CGO_ENABLED=0\nFROM base AS build\nRUN go build .\nFROM scratch\n", "", nil},
		{"exec form", "FROM golang AS build\nENV CGO_ENABLED=0\nRUN [\"go\", \"build\", \".\"]\nFROM scratch\n", "", nil},

		{"real, CGO_ENABLED dropped from ENV", mutate("ENV GOTOOLCHAIN=auto \\\n    CGO_ENABLED=0", "ENV GOTOOLCHAIN=auto"), "CGO_ENABLED=0", nil},
		{"real, CGO_ENABLED=1", mutate("\\\n    CGO_ENABLED=0", "\\\n    CGO_ENABLED=1"), "CGO_ENABLED=0", nil},
		{"real, final stage alpine", mutate("\nFROM scratch\n", "\nFROM alpine:3\n"), "not FROM scratch", nil},
		{"real, final stage distroless", mutate("\nFROM scratch\n", "\nFROM gcr.io/distroless/static AS final\n"), "not FROM scratch", nil},
		{"real, second build not static", mutate("cd /src/bench && go build", "cd /src/bench && CGO_ENABLED=1 go build"), "CGO_ENABLED=0", nil},
		{"not inherited by a new base", "FROM golang AS base\nENV CGO_ENABLED=0\nFROM golang AS build\nRUN go build .\nFROM scratch\n", "CGO_ENABLED=0", nil},
		{"ENV after the build", "FROM golang AS build\nRUN go build .\nENV CGO_ENABLED=0\nFROM scratch\n", "CGO_ENABLED=0", nil},
		{"set for another command only", "FROM golang AS build\nRUN CGO_ENABLED=0 go vet . && go build .\nFROM scratch\n", "CGO_ENABLED=0", nil},
		{"exec form, not static", "FROM golang AS build\nRUN [\"go\", \"build\", \".\"]\nFROM scratch\n", "CGO_ENABLED=0", nil},
		{"unparsed build", "FROM golang AS build\nENV CGO_ENABLED=0\nRUN go build . && sh -c 'go build ./y'\nFROM scratch\n", "understood as commands", nil},
		{"no build", "FROM golang AS build\nRUN true\nFROM scratch\n", "no go build", nil},
		{"scratch only first", strings.Replace(static, "FROM scratch", "FROM debian", 1), "not FROM scratch", nil},

		{"real, with make's tag", real, "", []string{"grpcnotrace"}},
		{"real, a tag dropped", mutate("cd /src/bench && go build -trimpath -tags=grpcnotrace", "cd /src/bench && go build -trimpath"), "without the tag grpcnotrace", []string{"grpcnotrace"}},
		{"real, another tag", mutate("cd /src/switchyard && go build -trimpath -tags=grpcnotrace", "cd /src/switchyard && go build -trimpath -tags=netgo"), "without the tag grpcnotrace", []string{"grpcnotrace"}},
		{"tags flag, two words", "FROM golang AS build\nENV CGO_ENABLED=0\nRUN go build -tags a,grpcnotrace .\nFROM scratch\n", "", []string{"grpcnotrace"}},
		{"tags from GOFLAGS", "FROM golang AS build\nENV CGO_ENABLED=0 GOFLAGS=-tags=grpcnotrace\nRUN go build .\nFROM scratch\n", "", []string{"grpcnotrace"}},
		{"tags flag overrides GOFLAGS", "FROM golang AS build\nENV CGO_ENABLED=0 GOFLAGS=-tags=grpcnotrace\nRUN go build -tags=x .\nFROM scratch\n", "without the tag", []string{"grpcnotrace"}},
		{"no tags", static, "without the tag grpcnotrace", []string{"grpcnotrace"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			problems := strings.Join(checkDockerfile(tc.text, tc.tags...), "\n")
			switch {
			case tc.want == "" && problems != "":
				t.Errorf("rejected:\n%s", problems)
			case tc.want != "" && !strings.Contains(problems, tc.want):
				t.Errorf("problems %q; want one mentioning %q", problems, tc.want)
			}
		})
	}
}
