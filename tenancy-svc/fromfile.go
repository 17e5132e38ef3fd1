package tenancy

import (
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/proto"
)

// FromFile takes the catalog to seed from the shared configuration file.
func FromFile(f *config.File) Config {
	c := Config{Upstreams: make([]proto.UpstreamSpec, 0, len(f.Upstreams))}
	for _, u := range f.Upstreams {
		c.Upstreams = append(c.Upstreams, u.Spec())
	}
	return c
}
