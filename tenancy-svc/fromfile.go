package tenancy

import (
	"fmt"
	"os"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/provision"
	"github.com/switchyard-mcp/switchyard/proto"
)

// FromFile takes what to seed from the shared configuration file: the
// upstream catalog, the tenants (config.DefaultTenants when the file has
// none, as config.Load fills in) and the API key records, hash only. A key
// that could not be read (its variable unset, its file unreadable: the
// configuration check leaves that to this service) goes to Problems, and
// New fails with it.
func FromFile(f *config.File) Config {
	c := Config{Upstreams: make([]proto.UpstreamSpec, 0, len(f.Upstreams))}
	for _, u := range f.Upstreams {
		c.Upstreams = append(c.Upstreams, u.Spec())
	}
	plan := provision.FromFile(f)
	if key, err := f.Tasks.Key(os.ReadFile); err != nil {
		c.Problems = append(c.Problems, err)
	} else if key != nil {
		plan.Fixed = map[string][]byte{proto.KeyTasks: key}
	}
	c.Provision = &plan
	c.Tenants = f.Tenants
	if c.Tenants == nil {
		c.Tenants = config.DefaultTenants()
	}
	now := time.Now()
	for i := range f.APIKeys {
		k := &f.APIKeys[i]
		r, err := k.Record(now)
		if err != nil {
			c.Problems = append(c.Problems, fmt.Errorf("api_keys[%d] (%s/%s): %w", i, k.Tenant, k.Principal, err))
			continue
		}
		c.APIKeys = append(c.APIKeys, r)
	}
	return c
}
