package config

import (
	"strings"
	"testing"
)

func TestConfigNATS(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		want       NATSFile
		wantErr    string
	}{
		{name: "a URL", yaml: "nats: nats://bus:4222\n", want: NATSFile{URL: "nats://bus:4222"}},
		{name: "several URLs", yaml: "nats: tls://a:4222,tls://b:4222\n", want: NATSFile{URL: "tls://a:4222,tls://b:4222"}},
		{name: "a mapping", yaml: "nats:\n  url: tls://bus:4222\n  creds: /c/edge.creds\n  ca: /c/ca.pem\n  cert: /c/e.pem\n  key: /c/e-key.pem\n  audit_creds: /c/audit.creds\n",
			want: NATSFile{URL: "tls://bus:4222", Creds: "/c/edge.creds", CA: "/c/ca.pem", Cert: "/c/e.pem", Key: "/c/e-key.pem", AuditCreds: "/c/audit.creds"}},
		{name: "the environment wins", yaml: "nats:\n  url: tls://file:4222\n  creds: /file.creds\n",
			env:  map[string]string{"SWITCHYARD_NATS": "tls://env:4222", "SWITCHYARD_NATS_CREDS": "/env", "SWITCHYARD_NATS_CA": "/ca.pem"},
			want: NATSFile{URL: "tls://env:4222", Creds: "/env", CA: "/ca.pem"}},
		{name: "default URL", yaml: "nats:\n  creds: /c\n", want: NATSFile{URL: DefaultNATS, Creds: "/c"}},
		{name: "unknown key", yaml: "nats:\n  url: nats://x:1\n  password: hunter2\n", wantErr: "field password not found"},
		{name: "bad scheme", yaml: "nats: http://bus:4222\n", wantErr: `scheme "http"`},
		{name: "not a URL, password not echoed", yaml: "nats: \"nats://u:hunter2@\"\n", wantErr: "is not a URL"},
		{name: "no scheme, password not echoed", yaml: "nats: \"alice:hunter2@127.0.0.1:4222\"\n", wantErr: "server 1 (<redacted>)"},
		{name: "cert without key", yaml: "nats:\n  url: tls://x:1\n  cert: /c.pem\n", wantErr: "set both or neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f File
			err := Parse([]byte(tc.yaml), &f)
			if err == nil {
				f.applyEnv(func(k string) string { return tc.env[k] })
				f.fillDefaults()
				err = f.Validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.NATS != tc.want {
				t.Fatalf("nats = %+v, want %+v", f.NATS, tc.want)
			}
		})
	}
}

func TestConfigRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "",
		"nats://bus:4222":             "nats://bus:4222",
		"nats://u:p@bus:4222":         "nats://redacted@bus:4222",
		"tls://token@a:1, nats://b:2": "tls://redacted@a:1,nats://b:2",
		"nats://u:p%zz@bus":           "nats://redacted@bus",
		"alice:s3cret@127.0.0.1:4222": "<redacted>",
		"tls://s3cr/et@host:4222":     "tls://redacted@host:4222",
		"nats://a@b@host":             "nats://redacted@host",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConfigRouteCacheTTLBounded(t *testing.T) {
	var f File
	if err := Parse([]byte("edge:\n  route_cache_ttl: 2m\n"), &f); err != nil {
		t.Fatal(err)
	}
	f.fillDefaults()
	if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "route_cache_ttl: at most") {
		t.Fatalf("route_cache_ttl 2m: %v", err)
	}
}
