package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/audit"
)

// AuditFile is the audit trail section (docs/audit.md): the edge records
// one event per MCP request in the JetStream stream it names, and every
// admin listener serves the search at /audit/events.
type AuditFile struct {
	// Enabled turns the audit trail on. Default true (nil); false: the
	// edge records nothing and /audit/ is not served. Env
	// SWITCHYARD_AUDIT_ENABLED.
	Enabled *bool `yaml:"enabled"`
	// Stream is the JetStream stream's name. Default SWITCHYARD_AUDIT.
	Stream string `yaml:"stream"`
	// MaxAge drops events older than this. "0s" or absent: 720h (30
	// days); negative: no age limit.
	MaxAge Duration `yaml:"max_age"`
	// MaxBytes bounds the stream's size in bytes; the oldest events go
	// first. 0: 10 GiB; negative: unlimited.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxMsgs bounds the number of stored events. 0: unlimited.
	MaxMsgs int64 `yaml:"max_msgs"`
	// Replicas is the stream's replica count in a NATS cluster (1..5).
	// 0: automatic, as the KV buckets' (nats.replicas, else 3 on a
	// cluster of 3 or more nodes, else 1); 1 with async_writes.
	Replicas int `yaml:"replicas"`
	// AsyncWrites creates a one-replica stream in JetStream's async
	// persist mode: events are acknowledged before they are written to
	// the file, and those not yet flushed are lost if the NATS server is
	// killed. Default false. Fixed when the stream is created, and not
	// allowed with replicas > 1 (audit.StreamConfig.AsyncWrites).
	AsyncWrites bool `yaml:"async_writes"`
	// Buffer is how many events an edge queues for publishing; past it
	// events are dropped (and counted), never the call. 0: 8192; at most
	// 1,000,000 (audit.MaxBuffer).
	Buffer int `yaml:"buffer"`
	// BufferBytes bounds the bytes of recorded arguments and results the
	// queued events hold; past it events are queued without them (and
	// counted). 0: 64 MiB; at most 16 GiB (audit.MaxBufferBytes).
	BufferBytes int64 `yaml:"buffer_bytes"`
	// Redact are field paths redacted from every recorded arguments and
	// result ("arguments.password", "result.content[*].text").
	Redact []string `yaml:"redact"`
	// Tenants are the tenants that record arguments or results, by name.
	// A tenant not listed records neither.
	Tenants map[string]AuditTenant `yaml:"tenants"`
}

// AuditTenant is one tenant's audit settings.
type AuditTenant struct {
	// RecordArguments records tools/call arguments and prompts/get
	// arguments, redacted.
	RecordArguments bool `yaml:"record_arguments"`
	// RecordResults records results, redacted.
	RecordResults bool `yaml:"record_results"`
	// Redact are field paths redacted in addition to the section's.
	Redact []string `yaml:"redact"`
}

// On reports whether the audit trail is enabled.
func (a *AuditFile) On() bool { return a.Enabled == nil || *a.Enabled }

// StreamName is the audit stream's name, defaults applied.
func (a *AuditFile) StreamName() string {
	if a.Stream == "" {
		return audit.DefaultStream
	}
	return a.Stream
}

// PublisherConfig is the section as an audit.Config; nil when the audit
// trail is off.
func (a *AuditFile) PublisherConfig() *audit.Config {
	if !a.On() {
		return nil
	}
	c := &audit.Config{
		Stream: audit.StreamConfig{
			Name: a.Stream, MaxAge: time.Duration(a.MaxAge), MaxBytes: a.MaxBytes,
			MaxMsgs: a.MaxMsgs, Replicas: a.Replicas, AsyncWrites: a.AsyncWrites,
		},
		Buffer:      a.Buffer,
		BufferBytes: a.BufferBytes,
		Redact:      a.Redact,
	}
	if len(a.Tenants) > 0 {
		c.Tenants = make(map[string]audit.TenantPolicy, len(a.Tenants))
		for n, t := range a.Tenants {
			c.Tenants[n] = audit.TenantPolicy{RecordArguments: t.RecordArguments, RecordResults: t.RecordResults, Redact: t.Redact}
		}
	}
	return c
}

// validate reports the section's problems; tenants are the configured
// tenant names.
func (a *AuditFile) validate(tenants map[string]bool) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("audit: "+format, args...)) }
	switch {
	case a.Stream != "" && !validStreamName(a.Stream):
		bad("stream: %q is not a stream name (letters, digits, - and _)", a.Stream)
	case strings.HasPrefix(a.Stream, "KV_") || strings.HasPrefix(a.Stream, "OBJ_"):
		// The edges create or update the stream: naming a KV bucket's or
		// object store's stream would rebind its subjects.
		bad("stream: %q is a KV bucket's or object store's stream", a.Stream)
	}
	if a.MaxMsgs < 0 {
		bad("max_msgs: must not be negative")
	}
	if a.Replicas < 0 || a.Replicas > 5 {
		bad("replicas: must be 1..5, got %d", a.Replicas)
	}
	if a.AsyncWrites && a.Replicas > 1 {
		bad("async_writes: JetStream allows it on one replica only, got replicas %d", a.Replicas)
	}
	if a.Buffer < 0 || a.Buffer > audit.MaxBuffer {
		bad("buffer: must be 0..%d events, got %d", audit.MaxBuffer, a.Buffer)
	}
	if a.BufferBytes < 0 || a.BufferBytes > audit.MaxBufferBytes {
		bad("buffer_bytes: must be 0..%d bytes, got %d", int64(audit.MaxBufferBytes), a.BufferBytes)
	}
	if _, err := audit.NewRedactor(a.Redact); err != nil {
		bad("redact: %v", err)
	}
	for _, n := range slices.Sorted(maps.Keys(a.Tenants)) {
		if !tenants[n] {
			bad("tenants: %q is not a configured tenant", n)
		}
		if _, err := audit.NewRedactor(a.Tenants[n].Redact); err != nil {
			bad("tenants.%s.redact: %v", n, err)
		}
	}
	return errs
}

func validStreamName(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return len(s) <= 255
}

// applyAuditEnv overrides audit.enabled from SWITCHYARD_AUDIT_ENABLED.
func (f *File) applyAuditEnv(getenv func(string) string) {
	v := getenv("SWITCHYARD_AUDIT_ENABLED")
	if v == "" {
		return
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		f.envErrs = append(f.envErrs, errors.New("SWITCHYARD_AUDIT_ENABLED: not true or false"))
		return
	}
	f.Audit.Enabled = &b
}
