package config

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/audit"
)

func TestConfigAudit(t *testing.T) {
	dir := t.TempDir()
	const tenants = "tenants:\n  - {name: acme, anonymous: true, policy: {all_upstreams: true, default: allow}}\n"
	cases := []struct {
		name, yaml string
		env        map[string]string
		check      func(t *testing.T, f *File)
		err        string
	}{
		{name: "on by default", check: func(t *testing.T, f *File) {
			c := f.Audit.PublisherConfig()
			if !f.Audit.On() || c == nil || f.Audit.StreamName() != audit.DefaultStream || c.Stream.Name != "" || c.Tenants != nil {
				t.Errorf("audit = %+v, publisher config %+v", f.Audit, c)
			}
		}},
		{name: "off", yaml: "audit:\n  enabled: false\n", check: func(t *testing.T, f *File) {
			if f.Audit.On() || f.Audit.PublisherConfig() != nil {
				t.Error("still on")
			}
		}},
		{name: "env off", yaml: "audit:\n  enabled: true\n", env: map[string]string{"SWITCHYARD_AUDIT_ENABLED": "false"},
			check: func(t *testing.T, f *File) {
				if f.Audit.On() {
					t.Error("still on")
				}
			}},
		{name: "every key", yaml: tenants + "audit:\n  stream: AUD_1\n  max_age: 48h\n  max_bytes: 1048576\n  max_msgs: 1000\n  replicas: 3\n  buffer: 64\n  buffer_bytes: 4096\n" +
			"  redact: [arguments.password]\n  tenants:\n    acme: {record_arguments: true, record_results: true, redact: ['result.content[*].text']}\n",
			check: func(t *testing.T, f *File) {
				c := f.Audit.PublisherConfig()
				s := c.Stream
				if s.Name != "AUD_1" || s.MaxAge != 48*time.Hour || s.MaxBytes != 1<<20 || s.MaxMsgs != 1000 || s.Replicas != 3 || c.Buffer != 64 || c.BufferBytes != 4096 ||
					len(c.Redact) != 1 || f.Audit.StreamName() != "AUD_1" {
					t.Errorf("publisher config = %+v", c)
				}
				if tp := c.Tenants["acme"]; !tp.RecordArguments || !tp.RecordResults || len(tp.Redact) != 1 {
					t.Errorf("acme = %+v", tp)
				}
			}},
		{name: "unknown tenant", yaml: tenants + "audit:\n  tenants:\n    globex: {record_arguments: true}\n", err: `audit: tenants: "globex" is not a configured tenant`},
		{name: "bad path", yaml: "audit:\n  redact: ['arguments.[']\n", err: "audit: redact"},
		{name: "bad tenant path", yaml: tenants + "audit:\n  tenants:\n    acme: {redact: ['results.x']}\n", err: "audit: tenants.acme.redact"},
		{name: "bad stream", yaml: "audit:\n  stream: a.b\n", err: "audit: stream"},
		{name: "a KV bucket's stream", yaml: "audit:\n  stream: KV_switchyard_tenants\n", err: "KV bucket"},
		{name: "bad numbers", yaml: "audit:\n  replicas: 7\n  buffer: -1\n  max_msgs: -2\n", err: "replicas"},
		{name: "largest buffers", yaml: "audit:\n  buffer: 1000000\n  buffer_bytes: 17179869184\n", check: func(t *testing.T, f *File) {
			if c := f.Audit.PublisherConfig(); c.Buffer != audit.MaxBuffer || c.BufferBytes != audit.MaxBufferBytes {
				t.Errorf("publisher config = %+v", c)
			}
		}},
		{name: "negative buffer", yaml: "audit:\n  buffer: -1\n", err: "audit: buffer: must be 0..1000000 events, got -1"},
		{name: "huge buffer", yaml: "audit:\n  buffer: 1000001\n", err: "audit: buffer: must be 0..1000000 events, got 1000001"},
		{name: "huger buffer", yaml: "audit:\n  buffer: 9223372036854775807\n", err: "audit: buffer: must be 0..1000000"},
		{name: "negative buffer_bytes", yaml: "audit:\n  buffer_bytes: -1\n", err: "audit: buffer_bytes: must be 0..17179869184 bytes, got -1"},
		{name: "huge buffer_bytes", yaml: "audit:\n  buffer_bytes: 17179869185\n", err: "audit: buffer_bytes: must be 0..17179869184 bytes, got 17179869185"},
		{name: "async writes", yaml: "audit:\n  async_writes: true\n", check: func(t *testing.T, f *File) {
			if c := f.Audit.PublisherConfig(); !c.Stream.AsyncWrites {
				t.Errorf("publisher config = %+v", c)
			}
		}},
		{name: "async writes replicated", yaml: "audit:\n  async_writes: true\n  replicas: 3\n", err: "audit: async_writes: JetStream allows it on one replica only, got replicas 3"},
		{name: "unknown key", yaml: "audit:\n  retention: 1d\n", err: "retention"},
		{name: "bad env", env: map[string]string{"SWITCHYARD_AUDIT_ENABLED": "maybe"}, err: "SWITCHYARD_AUDIT_ENABLED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := loadCase(t, dir, tc.name, tc.yaml, tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, f)
		})
	}
}
