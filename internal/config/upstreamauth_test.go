package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/switchyard-mcp/switchyard/proto"
)

// TestConfigUpstreamAuth loads upstreams[].auth: the catalog entry names
// the sources, and an auth that is all zero is no auth.
func TestConfigUpstreamAuth(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name string
		auth string // the auth: value, YAML flow style
		want *proto.UpstreamAuth
	}{
		{"bearer from a variable", "{bearer_env: GH_TOKEN}", &proto.UpstreamAuth{BearerEnv: "GH_TOKEN"}},
		{"bearer from a file", "{bearer_file: /run/secrets/tok}", &proto.UpstreamAuth{BearerFile: "/run/secrets/tok"}},
		{
			"headers and passthrough",
			"{headers: [{name: X-Api-Key, env: VENDOR_KEY}, {name: x-org, file: /etc/org}], passthrough: true}",
			&proto.UpstreamAuth{Passthrough: true, Headers: []proto.HeaderSource{
				{Name: "X-Api-Key", Env: "VENDOR_KEY"}, {Name: "x-org", File: "/etc/org"},
			}},
		},
		{"Authorization as a header without a bearer", "{headers: [{name: Authorization, file: /etc/basic}]}",
			&proto.UpstreamAuth{Headers: []proto.HeaderSource{{Name: "Authorization", File: "/etc/basic"}}}},
		{"passthrough beside a bearer", "{bearer_env: T, passthrough: true}", &proto.UpstreamAuth{BearerEnv: "T", Passthrough: true}},
		{"empty", "{}", nil},
		{"passthrough false", "{passthrough: false}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := "upstreams:\n  - name: a\n    url: http://a\n    auth: " + tt.auth + "\n"
			f, err := Load(writeConfig(t, body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, f.Upstreams[0].Spec().Auth); diff != "" {
				t.Errorf("spec auth (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConfigUpstreamAuthInvalid: each rule of CheckUpstreamAuth, through
// Load, with the field named.
func TestConfigUpstreamAuthInvalid(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name      string
		transport string // "" with a url: streamable
		auth      string
		want      []string
	}{
		{"unknown key", "", "{bearer: x}", []string{"bearer"}},
		{"unknown header key", "", "{headers: [{name: X-A, env: A, value: secret}]}", []string{"value"}},
		{"stdio", "stdio", "{bearer_env: T}", []string{"upstreams[0] (a): auth: only for HTTP transports"}},
		{"two bearer sources", "", "{bearer_env: T, bearer_file: /f}", []string{"auth: bearer_env and bearer_file"}},
		{"bad variable name", "", "{bearer_env: 'A-B'}", []string{"bearer_env:", `"A-B"`}},
		{"variable name starting with a digit", "", "{headers: [{name: X-A, env: 1A}]}", []string{"headers[0] (X-A): env:", `"1A"`}},
		{"header without a source", "", "{headers: [{name: X-A}]}", []string{"headers[0] (X-A): env or file: required"}},
		{"header with two sources", "", "{headers: [{name: X-A, env: A, file: /f}]}", []string{"headers[0] (X-A): env and file"}},
		{"header without a name", "", "{headers: [{env: A}]}", []string{"headers[0]: name \"\""}},
		{"header name with a space", "", "{headers: [{name: 'X A', env: A}]}", []string{`name "X A" is not a valid header field name`}},
		{"header name with a colon", "", "{headers: [{name: 'X:A', env: A}]}", []string{`"X:A"`}},
		{"Authorization beside a bearer", "", "{bearer_env: T, headers: [{name: authorization, env: A}]}",
			[]string{"headers[0]: Authorization beside bearer_env"}},
		{"duplicate header", "", "{headers: [{name: X-A, env: A}, {name: x-a, env: B}]}", []string{"headers[1]: X-A: the same header as headers[0]"}},
		{"session id", "", "{headers: [{name: Mcp-Session-Id, env: A}]}", []string{"Mcp-Session-Id is set by the gateway"}},
		{"protocol version", "", "{headers: [{name: mcp-protocol-version, env: A}]}", []string{"Mcp-Protocol-Version is set by the gateway"}},
		{"param header", "", "{headers: [{name: Mcp-Param-Region, env: A}]}", []string{"Mcp-Param-Region is set by the gateway"}},
		{"content type", "", "{headers: [{name: Content-Type, env: A}]}", []string{"Content-Type is set"}},
		{"accept", "", "{headers: [{name: Accept, env: A}]}", []string{"Accept is set"}},
		{"host", "", "{headers: [{name: Host, env: A}]}", []string{"Host is set"}},
		{"content length", "", "{headers: [{name: Content-Length, env: A}]}", []string{"Content-Length is set"}},
		{"hop-by-hop", "", "{headers: [{name: Connection, env: A}, {name: Transfer-Encoding, env: B}, {name: TE, env: C}, {name: Upgrade, env: D}]}",
			[]string{"Connection is set", "Transfer-Encoding is set", "Te is set", "Upgrade is set"}},
		{"proxy credentials", "", "{headers: [{name: Proxy-Authorization, env: A}]}", []string{"Proxy-Authorization is set"}},
		{"last event id", "", "{headers: [{name: Last-Event-ID, env: A}]}", []string{"Last-Event-Id is set"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := "upstreams:\n  - name: a\n    url: http://a\n    auth: " + tt.auth + "\n"
			if tt.transport == "stdio" {
				body = "upstreams:\n  - name: a\n    command: [x]\n    auth: " + tt.auth + "\n"
			}
			f, err := Load(writeConfig(t, body))
			if err == nil {
				t.Fatalf("Load accepted the file: %+v", f.Upstreams[0].Auth)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestConfigUpstreamAuthNoValues: the configuration never holds a
// secret, even when the named variable and file exist where it is
// loaded: the spec and the printed configuration (what --check-config
// prints) carry the names only.
func TestConfigUpstreamAuthNoValues(t *testing.T) {
	clearEnv(t)
	const secret, fileSecret = "s3cret-bearer-value", "s3cret-file-value"
	t.Setenv("SY_TEST_UPSTREAM_TOKEN", secret)
	file := writeConfig(t, fileSecret)
	body := "upstreams:\n  - name: a\n    url: http://a\n    auth:\n      bearer_env: SY_TEST_UPSTREAM_TOKEN\n" +
		"      headers: [{name: X-Api-Key, file: " + file + "}]\n"
	f, err := Load(writeConfig(t, body))
	if err != nil {
		t.Fatal(err)
	}
	printed, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := proto.Marshal(new(f.Upstreams[0].Spec()))
	if err != nil {
		t.Fatal(err)
	}
	for what, b := range map[string][]byte{"printed config": printed, "catalog entry": spec} {
		if s := string(b); strings.Contains(s, secret) || strings.Contains(s, fileSecret) {
			t.Errorf("%s holds a secret:\n%s", what, s)
		}
		if !strings.Contains(string(b), "SY_TEST_UPSTREAM_TOKEN") || !strings.Contains(string(b), file) {
			t.Errorf("%s does not name the sources:\n%s", what, b)
		}
	}
}

// TestConfigExampleUpstreamAuthYAML: the example loads, and every HTTP
// upstream in it names its credentials.
func TestConfigExampleUpstreamAuthYAML(t *testing.T) {
	clearEnv(t)
	f, err := Load("../../examples/upstream-auth.yaml")
	if err != nil {
		t.Fatalf("examples/upstream-auth.yaml: %v", err)
	}
	for _, u := range f.Upstreams {
		if got := u.Spec().Auth; (got != nil) != (u.Transport != proto.TransportStdio) {
			t.Errorf("upstream %s (%s): auth %+v", u.Name, u.Transport, got)
		}
	}
}
