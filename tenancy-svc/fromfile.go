package tenancy

import (
	"time"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/proto"
)

// FromFile takes what to seed from the shared configuration file: the
// upstream catalog, the tenants (config.DefaultTenants when the file has
// none, as config.Load fills in) and the API key records, hash only. A key
// the file could not load becomes an invalid record that New rejects.
func FromFile(f *config.File) Config {
	c := Config{Upstreams: make([]proto.UpstreamSpec, 0, len(f.Upstreams))}
	for _, u := range f.Upstreams {
		c.Upstreams = append(c.Upstreams, u.Spec())
	}
	c.Tenants = f.Tenants
	if c.Tenants == nil {
		c.Tenants = config.DefaultTenants()
	}
	now := time.Now()
	for i := range f.APIKeys {
		k := &f.APIKeys[i]
		r, err := k.Record(now)
		if err != nil {
			r = apikey.Record{Tenant: k.Tenant, Principal: k.Principal}
		}
		c.APIKeys = append(c.APIKeys, r)
	}
	return c
}
