package worker

import (
	"time"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/config"
)

// FromFile takes the worker's settings from the shared configuration file:
// worker.id (a random "worker-…" id when empty), worker.upstreams,
// worker.heartbeat_interval, call_timeout and max_result_bytes. The other
// fields keep their defaults.
func FromFile(f *config.File) Config {
	id := f.Worker.ID
	if id == "" {
		id = bus.NewID("worker")
	}
	return Config{
		ID:                id,
		Upstreams:         f.Worker.Upstreams,
		HeartbeatInterval: time.Duration(f.Worker.HeartbeatInterval),
		CallTimeout:       time.Duration(f.CallTimeout),
		MaxResultBytes:    int(f.MaxResultBytes),
	}
}
