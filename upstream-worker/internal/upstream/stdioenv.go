package upstream

import (
	"os"
	"slices"
	"strings"
)

// A stdio server is a program the worker runs on its host, often a
// third party's. It gets none of the worker's environment (which holds
// the credentials of other upstreams, the worker's NATS credentials, its
// tracing headers) but a minimal base that programs need to run, and what
// its own upstreams[].env names.

// baseEnv are the worker's variables a stdio server inherits, when set:
// where programs are found, the home and temporary directories, the user,
// the locale and the time zone.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "LANGUAGE", "TZ"}

// stdioEnv is the environment of a stdio server: the variables the worker
// has among the base ones (baseEnv, and LC_*) and inherit (its
// inherit_env), then extra (its configured env, which wins).
func stdioEnv(extra map[string]string, inherit []string) []string {
	env := make([]string, 0, len(baseEnv)+len(extra)+len(inherit)+4)
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if _, own := extra[name]; own {
			continue
		}
		if strings.HasPrefix(name, "LC_") || isBase(name) || slices.Contains(inherit, name) {
			env = append(env, kv)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

func isBase(name string) bool {
	for _, b := range baseEnv {
		if name == b {
			return true
		}
	}
	return false
}
