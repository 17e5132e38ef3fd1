package admin

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// ServiceConfig names a role's NATS micro service.
type ServiceConfig struct {
	// Name is the service name: switchyard-edge, switchyard-router,
	// switchyard-worker.
	Name string
	// ID is the role's own id (edge id, worker id, router id), given in
	// the service's metadata "id" (micro assigns the service's instance
	// id itself).
	ID string
	// Version is semver (internal/metrics.Version).
	Version string
	// Description is a one-line description.
	Description string
	// Metadata is added to the service's metadata.
	Metadata map[string]string
}

// AddService registers an endpoint-less micro service on nc, so the role
// answers $SRV.PING, $SRV.INFO and $SRV.STATS (`nats micro ls` lists it,
// `nats micro info <name>` shows the role ids). The role's work stays on
// its own subjects; Stop the service first when shutting down.
func AddService(nc *nats.Conn, c ServiceConfig) (micro.Service, error) {
	md := map[string]string{"id": c.ID}
	for k, v := range c.Metadata {
		md[k] = v
	}
	return micro.AddService(nc, micro.Config{
		Name:        c.Name,
		Version:     c.Version,
		Description: c.Description,
		Metadata:    md,
	})
}
