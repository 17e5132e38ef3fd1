package tenancy

import (
	"time"

	"github.com/switchyard-mcp/switchyard/internal/admin"
)

// Checks reports the service's readiness check by check (internal/admin):
// the NATS connection, the buckets seeded with the micro service serving,
// and the resolve snapshot (stale: a warning, the last one keeps serving).
func (s *Service) Checks() []admin.Check {
	c := admin.OK("resolve_snapshot", s.watch.Ready(), "tenancy snapshot not loaded")
	if stale, since, reason := s.watch.Stale(); stale && c.Status == admin.StatusOK {
		c = admin.Check{Name: "resolve_snapshot", Status: admin.StatusWarn, Detail: "stale since " + since.UTC().Format(time.RFC3339) + ": " + reason}
	}
	return []admin.Check{
		admin.OK("nats", s.nc.IsConnected(), "not connected"),
		admin.OK("seeded", s.ready.Load(), "buckets not seeded or micro service not started"),
		c,
	}
}
