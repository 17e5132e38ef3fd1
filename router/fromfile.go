package router

import (
	"time"

	"github.com/switchyard-mcp/switchyard/internal/config"
)

// FromFile takes the router's settings from the shared configuration file.
func FromFile(f *config.File) Config {
	c := Config{PageSize: f.PageSize, NameSeparator: f.NameSeparator}
	// Grants live as long as the edges keep them, plus clock skew.
	if t := f.Edge.RouteCacheTTL; t != nil && time.Duration(*t) > 0 {
		c.GrantValidity = time.Duration(*t) + DefaultGrantValidity - time.Second
	}
	return c
}
