package edge

import (
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/config"
)

// TestFromFileEdgeBounds: the edge's timeouts and caps come from the file;
// "0s" and 0 there mean none (negative in Config), absent means the
// default.
func TestFromFileEdgeBounds(t *testing.T) {
	cases := []struct {
		name string
		body string
		want func(c Config) bool
	}{
		{"absent: defaults", "", func(c Config) bool {
			return c.ReadTimeout == 0 && c.WriteTimeout == 0 && c.MaxSessions == 0 && c.MaxConnections == 0
		}},
		{"set", "edge:\n  read_timeout: 5s\n  write_timeout: 7s\n  idle_timeout: 9s\n  read_header_timeout: 2s\n  max_connections: 100\n  max_sessions: 50\n  max_tenant_sessions: 10\n", func(c Config) bool {
			return c.ReadTimeout == 5*time.Second && c.WriteTimeout == 7*time.Second && c.IdleTimeout == 9*time.Second &&
				c.ReadHeaderTimeout == 2*time.Second && c.MaxConnections == 100 && c.MaxSessions == 50 && c.MaxTenantSessions == 10
		}},
		{"zero: none", "edge:\n  read_timeout: 0s\n  write_timeout: 0s\n  max_connections: 0\n  max_sessions: 0\n  max_tenant_sessions: 0\n", func(c Config) bool {
			return c.ReadTimeout < 0 && c.WriteTimeout < 0 && c.MaxConnections < 0 && c.MaxSessions < 0 && c.MaxTenantSessions < 0
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f config.File
			if err := config.Parse([]byte(tc.body), &f); err != nil {
				t.Fatal(err)
			}
			if c := FromFile(&f); !tc.want(c) {
				t.Fatalf("%+v", c)
			}
		})
	}
	// The defaults New applies.
	c := Config{}
	if err := c.fill(); err != nil {
		t.Fatal(err)
	}
	if c.ReadTimeout != 30*time.Second || c.WriteTimeout != 30*time.Second || c.IdleTimeout != 120*time.Second ||
		c.ReadHeaderTimeout != 10*time.Second || c.MaxSessions != DefaultMaxSessions || c.MaxTenantSessions != DefaultMaxTenantSessions ||
		c.MaxConnections < 64 || c.MaxConnections > 16384 {
		t.Fatalf("defaults %+v", c)
	}
}
