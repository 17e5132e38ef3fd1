package edge

import (
	"time"

	"github.com/switchyard-mcp/switchyard/internal/config"
)

// FromFile takes the edge's settings from the shared configuration file.
func FromFile(f *config.File) Config {
	c := Config{
		ID:                  f.Edge.ID,
		Listen:              f.Listen,
		CallTimeout:         time.Duration(f.CallTimeout),
		MaxRequestBodyBytes: f.MaxRequestBodyBytes,
		MaxResultBytes:      f.MaxResultBytes,
		JSONResponse:        f.JSONResponse,
		TenantLabels:        f.Metrics.MaxTenantLabels(),
		NameSeparator:       f.NameSeparator,
		Audit:               f.Audit.PublisherConfig(),
		TrustedProxies:      f.Edge.TrustedProxyPrefixes(),
		AllowedOrigins:      f.Edge.Origins(),
		Auth: AuthConfig{
			JWT:                  f.Auth.JWTConfig(),
			PublicURL:            f.Auth.PublicURL,
			AuthorizationServers: f.Auth.AuthorizationServers,
			ScopesSupported:      f.Auth.ScopesSupported,
		},
	}
	if t := f.Edge.RouteCacheTTL; t != nil {
		c.RouteCacheTTL = time.Duration(*t)
		if c.RouteCacheTTL == 0 {
			c.RouteCacheTTL = -1 // "0s" in the file means off (Validate refuses negatives)
		}
	}
	if f.Edge.DrainDelay != nil {
		c.DrainDelay = time.Duration(*f.Edge.DrainDelay)
	}
	for _, d := range []struct {
		from *config.Duration
		to   *time.Duration
	}{{f.Edge.ReadHeaderTimeout, &c.ReadHeaderTimeout}, {f.Edge.ReadTimeout, &c.ReadTimeout},
		{f.Edge.WriteTimeout, &c.WriteTimeout}, {f.Edge.IdleTimeout, &c.IdleTimeout}, {f.Edge.SessionEvictAfter, &c.SessionEvictAfter}} {
		if d.from != nil {
			if *d.to = time.Duration(*d.from); *d.to == 0 {
				*d.to = -1 // "0s" in the file means none
			}
		}
	}
	for _, n := range []struct {
		from *int
		to   *int
	}{{f.Edge.MaxConnections, &c.MaxConnections}, {f.Edge.MaxSessions, &c.MaxSessions}, {f.Edge.MaxTenantSessions, &c.MaxTenantSessions}} {
		if n.from != nil {
			if *n.to = *n.from; *n.to == 0 {
				*n.to = -1 // 0 in the file means no cap
			}
		}
	}
	if f.SessionTimeout != nil {
		c.SessionTimeout = time.Duration(*f.SessionTimeout)
		if c.SessionTimeout == 0 {
			c.SessionTimeout = -1 // "0s" in the file means never
		}
	}
	return c
}
