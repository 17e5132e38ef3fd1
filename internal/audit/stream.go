package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/switchyard-mcp/switchyard/proto"
)

// DefaultStream is the audit stream's name.
const DefaultStream = proto.DefaultAuditStream

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
	// Replicas is the stream's replica count in a cluster; 0 leaves it to
	// provisioning (internal/provision: 3 on a cluster of 3 or more
	// nodes, else 1; JetStream's default of 1 for a stream created here).
	Replicas int
	// AsyncWrites creates a one-replica stream in JetStream's async
	// persist mode (jetstream.AsyncPersistMode): the server acknowledges
	// an event before writing it to its file and flushes in the
	// background, so events not yet flushed are lost if the NATS server
	// is killed. Off (the default), each event is written before its
	// acknowledgement. JetStream refuses async mode on a replicated
	// stream and refuses to change a stream's mode: it is fixed when the
	// stream is created (EnsureStream keeps an existing stream's), so a
	// stream created with it cannot later get more replicas without
	// being recreated.
	AsyncWrites bool
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
// duplicate window (the default), and async persist mode when AsyncWrites
// and one replica.
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
	if c.AsyncWrites && c.Replicas <= 1 {
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
		Replicas:    max(c.Replicas, 0),
		AllowDirect: true,
	}
}

// ErrAsyncReplicas is EnsureStream's error for more than one replica asked
// of a stream created with StreamConfig.AsyncWrites: JetStream allows
// async persist mode on one replica only and never changes a stream's
// mode, so the stream must be removed (its events with it) and created
// again to be replicated.
var ErrAsyncReplicas = errors.New("the stream was created with async writes (audit.async_writes), which JetStream allows on one replica only and cannot change: remove the stream to replicate it")

// EnsureStream creates the audit stream, or updates an existing one to
// cfg (changed limits take effect; a shrunk limit drops the oldest
// events). Safe to call from every edge: the configuration is the same
// everywhere.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	jc := cfg.JetStreamConfig()
	// JetStream refuses to change a stream's persist mode on update.
	if old, err := js.Stream(ctx, jc.Name); err == nil {
		jc.PersistMode = old.CachedInfo().Config.PersistMode
		if jc.PersistMode == jetstream.AsyncPersistMode && jc.Replicas > 1 {
			return nil, fmt.Errorf("ensure stream %s: %w", cfg.name(), ErrAsyncReplicas)
		}
	}
	s, err := js.CreateOrUpdateStream(ctx, jc)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", cfg.name(), err)
	}
	return s, nil
}
