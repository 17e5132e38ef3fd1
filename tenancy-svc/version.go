package tenancy

import (
	"runtime/debug"
	"strings"
)

// buildVersion is the admin service's version from the build: the main
// module's version when it is semver (a tagged or pseudo-version), else
// 0.0.0-devel with the VCS revision as build metadata when known.
func buildVersion() string {
	const fallback = "0.0.0-devel"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fallback
	}
	if v := strings.TrimPrefix(bi.Main.Version, "v"); semver.MatchString(v) {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ".dirty"
			}
		}
	}
	if rev == "" {
		return fallback
	}
	if v := fallback + "+" + rev[:min(12, len(rev))] + dirty; semver.MatchString(v) {
		return v
	}
	return fallback
}
