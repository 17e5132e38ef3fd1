package router

import "github.com/switchyard-mcp/switchyard/internal/config"

// FromFile takes the router's settings from the shared configuration file.
func FromFile(f *config.File) Config {
	return Config{PageSize: f.PageSize, NameSeparator: f.NameSeparator}
}
