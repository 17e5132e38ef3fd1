package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultStream is the audit stream's name.
const DefaultStream = "SWITCHYARD_AUDIT"

// Retention defaults: 30 days, 10 GiB, no message limit.
const (
	DefaultMaxAge   = 30 * 24 * time.Hour
	DefaultMaxBytes = 10 << 30
)

// StreamConfig is the audit stream's shape. The zero value is the
// defaults.
type StreamConfig struct {
	// Name of the stream; "" is DefaultStream.
	Name string
	// MaxAge drops events older than this; 0 is DefaultMaxAge, negative
	// keeps events until a size limit drops them.
	MaxAge time.Duration
	// MaxBytes bounds the stream's size in bytes (oldest events go
	// first); 0 is DefaultMaxBytes, negative is unlimited.
	MaxBytes int64
	// MaxMsgs bounds the number of events; 0 or negative is unlimited.
	MaxMsgs int64
	// Replicas is the stream's replica count in a cluster; 0 is 1.
	Replicas int
	// SyncWrites makes a one-replica stream write each event to its file
	// before acknowledging it (JetStream's default persist mode). Off,
	// the server flushes asynchronously (jetstream.AsyncPersistMode), and
	// events not yet flushed are lost if the NATS server is killed; the
	// trail already gives up buffered events rather than delay a call,
	// and the write per event was ~2% of the gateway's CPU at 64
	// connections. A replicated stream always flushes asynchronously
	// (its Raft log is the durable copy), so this applies to Replicas 1.
	// The mode is fixed when the stream is created: EnsureStream keeps
	// an existing stream's.
	SyncWrites bool
}

func (c StreamConfig) name() string {
	if c.Name == "" {
		return DefaultStream
	}
	return c.Name
}

// JetStreamConfig returns the stream configuration EnsureStream applies:
// file storage, subjects switchyard.v1.audit.>, limits retention,
// discard old, direct get allowed (the search reads with it), a 2-minute
// duplicate window (the default), and async persist mode for one replica
// unless SyncWrites.
func (c StreamConfig) JetStreamConfig() jetstream.StreamConfig {
	maxAge := c.MaxAge
	switch {
	case maxAge == 0:
		maxAge = DefaultMaxAge
	case maxAge < 0:
		maxAge = 0
	}
	maxBytes := c.MaxBytes
	switch {
	case maxBytes == 0:
		maxBytes = DefaultMaxBytes
	case maxBytes < 0:
		maxBytes = -1
	}
	maxMsgs := c.MaxMsgs
	if maxMsgs <= 0 {
		maxMsgs = -1
	}
	persist := jetstream.DefaultPersistMode
	if !c.SyncWrites && c.Replicas <= 1 {
		persist = jetstream.AsyncPersistMode
	}
	return jetstream.StreamConfig{
		PersistMode: persist,
		Name:        c.name(),
		Description: "Switchyard audit events, one per request (internal/audit)",
		Subjects:    []string{SubjectAll},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		MaxAge:      maxAge,
		MaxBytes:    maxBytes,
		MaxMsgs:     maxMsgs,
		MaxMsgSize:  MaxEventBytes,
		Replicas:    max(c.Replicas, 1),
		AllowDirect: true,
	}
}

// EnsureStream creates the audit stream, or updates an existing one to
// cfg (changed limits take effect; a shrunk limit drops the oldest
// events). Safe to call from every edge: the configuration is the same
// everywhere.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	jc := cfg.JetStreamConfig()
	// JetStream refuses to change a stream's persist mode on update.
	if old, err := js.Stream(ctx, jc.Name); err == nil {
		jc.PersistMode = old.CachedInfo().Config.PersistMode
	}
	s, err := js.CreateOrUpdateStream(ctx, jc)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", cfg.name(), err)
	}
	return s, nil
}
