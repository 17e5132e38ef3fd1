package config

import (
	"strings"
	"testing"
)

func TestConfigTracing(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, yaml string
		env        map[string]string
		check      func(t *testing.T, f *File)
		err        string
	}{
		{name: "off by default", check: func(t *testing.T, f *File) {
			if f.Tracing.Enabled {
				t.Error("tracing on by default")
			}
		}},
		{name: "disabled section not validated", yaml: "tracing:\n  protocol: carrier-pigeon\n"},
		{name: "file", yaml: "tracing:\n  enabled: true\n  endpoint: http://otel:4318\n  protocol: grpc\n  sample_ratio: 0.25\n  service_name: sy\n  headers:\n    x-team: abc\n",
			check: func(t *testing.T, f *File) {
				c := f.Tracing
				if !c.Enabled || c.Endpoint != "http://otel:4318" || c.Protocol != "grpc" || c.SampleRatio != 0.25 || c.ServiceName != "sy" || c.Headers["x-team"] != "abc" {
					t.Errorf("tracing = %+v", c)
				}
			}},
		{name: "env", yaml: "tracing:\n  headers:\n    x-team: file\n    x-keep: k\n",
			env: map[string]string{
				"SWITCHYARD_TRACING_ENABLED": "true", "SWITCHYARD_TRACING_ENDPOINT": "https://collector.example",
				"SWITCHYARD_TRACING_PROTOCOL": "http", "SWITCHYARD_TRACING_SAMPLE_RATIO": "0.5",
				"SWITCHYARD_TRACING_HEADERS": "x-team=env%20key,x-other=o",
			},
			check: func(t *testing.T, f *File) {
				c := f.Tracing
				if !c.Enabled || c.Endpoint != "https://collector.example" || c.Protocol != "http" || c.SampleRatio != 0.5 {
					t.Errorf("tracing = %+v", c)
				}
				if c.Headers["x-team"] != "env key" || c.Headers["x-other"] != "o" || c.Headers["x-keep"] != "k" {
					t.Errorf("headers = %v", c.Headers)
				}
			}},
		{name: "env turns off", yaml: "tracing:\n  enabled: true\n  endpoint: http://otel:4318\n",
			env: map[string]string{"SWITCHYARD_TRACING_ENABLED": "false"},
			check: func(t *testing.T, f *File) {
				if f.Tracing.Enabled {
					t.Error("still enabled")
				}
			}},
		{name: "enabled without endpoint", yaml: "tracing:\n  enabled: true\n", err: "endpoint is required"},
		{name: "every problem at once", yaml: "tracing:\n  enabled: true\n  endpoint: ftp://x\n  protocol: udp\n  sample_ratio: 2\n", err: "sample_ratio"},
		{name: "unknown key", yaml: "tracing:\n  exporter: otlp\n", err: "exporter"},
		{name: "bad env bool", env: map[string]string{"SWITCHYARD_TRACING_ENABLED": "yes please"}, err: "SWITCHYARD_TRACING_ENABLED"},
		{name: "bad env ratio", env: map[string]string{"SWITCHYARD_TRACING_SAMPLE_RATIO": "half"}, err: "SWITCHYARD_TRACING_SAMPLE_RATIO"},
		{name: "bad env headers", env: map[string]string{"SWITCHYARD_TRACING_HEADERS": "x-key=s3cret,nonsense"}, err: "entry 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := loadCase(t, dir, tc.name, tc.yaml, tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("error shows a header value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}
