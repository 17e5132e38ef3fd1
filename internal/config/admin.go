package config

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard-mcp/switchyard/internal/admin"
	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/jwtauth"
)

// Environment variables of the admin section (besides SWITCHYARD_ADMIN,
// the address).
const (
	// EnvAdminKey holds an admin key (scope admin) itself: convenient for
	// `make dev`. A worker passes its environment on to the stdio servers
	// it spawns, so in production prefer EnvAdminKeyFile.
	EnvAdminKey = "SWITCHYARD_ADMIN_KEY"
	// EnvAdminKeyFile names a file holding an admin key (scope admin),
	// such as a compose or Kubernetes secret.
	EnvAdminKeyFile = "SWITCHYARD_ADMIN_KEY_FILE"
	// EnvAdminInsecure is admin.insecure (true or false).
	EnvAdminInsecure = "SWITCHYARD_ADMIN_INSECURE"
)

// AdminFile is the admin listener: where it listens and who may use it
// (docs/observability.md). Written as the address alone, with no
// credential:
//
//	admin: 127.0.0.1:9090
//
// or as a mapping:
//
//	admin:
//	  listen: 0.0.0.0:9090
//	  keys:                                   # Switchyard API keys (syk_...): switchyard keygen
//	    - {key_file: /run/secrets/admin_key, scope: admin}
//	    - {key_env: PROMETHEUS_ADMIN_KEY, scope: metrics}
//	  jwt_claim:                              # bearer JWTs of the auth.jwt issuers
//	    name: roles
//	    admin: [switchyard-admin]
//	    audit: [auditor]
//	    metrics: [scraper]
//	    audiences: [https://gw.example.com/admin]   # default: the issuers' audiences
//	  insecure: false
//
// Scopes: admin may do everything; audit may read the audit search
// (/audit/); metrics may scrape /metrics. /healthz and /readyz need no
// credential. A listener that is not on loopback needs a key or a JWT
// claim, or insecure: true, to start; the audit search needs an audit or
// admin credential on every listener.
type AdminFile struct {
	// Listen is host:port ("127.0.0.1:9090"; port 0 picks one). Empty:
	// no admin listener. Env SWITCHYARD_ADMIN, flag --admin.
	Listen string `yaml:"listen"`
	// Keys are the admin keys and their scopes. Env SWITCHYARD_ADMIN_KEY
	// and SWITCHYARD_ADMIN_KEY_FILE each add one of scope admin.
	Keys []AdminKey `yaml:"keys,omitempty"`
	// JWTClaim grants scopes to bearer JWTs verified with auth.jwt's
	// issuers, by the values of one claim. Nil: no JWTs.
	JWTClaim *AdminJWTClaim `yaml:"jwt_claim,omitempty"`
	// Insecure serves /metrics and the readiness details without a
	// credential on any address, as on loopback (a trusted network);
	// logged as a warning at start. The audit search still needs a
	// credential. Env SWITCHYARD_ADMIN_INSECURE.
	Insecure bool `yaml:"insecure,omitempty"`
}

// AdminKey is one admin key. As for [APIKey], the key is never in the
// file: it is read at [Load] from the variable KeyEnv or the file KeyFile
// (exactly one of them), only its hash is kept once the listener starts,
// and it is never printed. A key that is present but malformed is a
// Validate error; one that is absent fails the start of the admin
// listener ([AdminKey.Record]), not Validate, so that --check-config and
// processes without an admin listener run without the secret.
type AdminKey struct {
	// KeyEnv names the environment variable holding the key.
	KeyEnv string `yaml:"key_env,omitempty"`
	// KeyFile is a file holding the key.
	KeyFile string `yaml:"key_file,omitempty"`
	// Scope is admin, audit or metrics.
	Scope string `yaml:"scope"`

	key    string // the plaintext, read by Load; never printed
	keyErr error  // no source, two sources: Validate reports it
	absent error  // unset variable, unreadable or empty file: Record reports it
}

// AdminJWTClaim maps the values of one claim of verified JWTs to admin
// scopes. The claim is a string or an array of strings; a token with
// values in several lists gets every scope they name, one with none of
// them is refused (403).
type AdminJWTClaim struct {
	// Name is the claim ("roles", "groups", "scope", ...).
	Name string `yaml:"name"`
	// Admin, Audit and Metrics list the values granting that scope.
	Admin   []string `yaml:"admin,omitempty"`
	Audit   []string `yaml:"audit,omitempty"`
	Metrics []string `yaml:"metrics,omitempty"`
	// Audiences are the aud values accepted on the admin listener.
	// Empty: each auth.jwt issuer's own audiences (those of the MCP
	// endpoint).
	Audiences []string `yaml:"audiences,omitempty"`
}

// Configured reports whether a credential (a key or a JWT claim) is
// configured.
func (a *AdminFile) Configured() bool { return len(a.Keys) > 0 || a.JWTClaim != nil }

// UnmarshalYAML takes the address alone (a scalar) or the mapping, whose
// keys are checked as strictly as the rest of the file.
func (a *AdminFile) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			*a = AdminFile{}
			return nil
		}
		*a = AdminFile{Listen: n.Value}
		return nil
	case yaml.MappingNode:
		// A custom unmarshaler's Node.Decode does not reject unknown
		// keys, whatever the file's decoder does: check them first.
		if err := knownFields(n, reflect.TypeFor[AdminFile](), "admin"); err != nil {
			return err
		}
		type plain AdminFile
		var p plain
		if err := n.Decode(&p); err != nil {
			return err
		}
		*a = AdminFile(p)
		return nil
	}
	return fmt.Errorf("line %d: admin: want an address (host:port) or a mapping (listen, keys, jwt_claim, insecure)", n.Line)
}

// MarshalYAML prints the address alone when nothing else is set, as it is
// usually written; keys print their source and scope, never the key.
func (a AdminFile) MarshalYAML() (any, error) {
	if !a.Configured() && !a.Insecure {
		return a.Listen, nil
	}
	type plain AdminFile
	return plain(a), nil
}

// knownFields fails, naming the line and the path, on a mapping key of n
// (or of the mappings inside it) that is not a yaml field of t.
func knownFields(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			if err := knownFields(c, t, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct:
		return nil
	}
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.IsExported() && name != "" && name != "-" {
			fields[name] = f.Type
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ft, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("line %d: field %s not found in %s", k.Line, k.Value, path)
		}
		if err := knownFields(n.Content[i+1], ft, path+"."+k.Value); err != nil {
			return err
		}
	}
	return nil
}

// Record returns the record of k (its id and hash, never the key) to
// verify presented keys against. It fails, naming KeyEnv or KeyFile but
// never showing key material, when the key could not be read or is not a
// Switchyard API key.
func (k *AdminKey) Record() (apikey.Record, error) {
	switch {
	case k.keyErr != nil:
		return apikey.Record{}, k.keyErr
	case k.absent != nil:
		return apikey.Record{}, k.absent
	case k.key == "":
		return apikey.Record{}, errors.New("key not loaded")
	}
	r, err := apikey.NewRecord(k.key, time.Now())
	if err != nil {
		return apikey.Record{}, fmt.Errorf("%s: %w", k.source(), err)
	}
	return r, nil
}

// SetKey sets the plaintext key, as Load does from KeyEnv or KeyFile; for
// callers that build a File without Load.
func (k *AdminKey) SetKey(key string) { k.key, k.keyErr, k.absent = key, nil, nil }

// Format prints k's source and scope for every verb (%v, %+v, %#v, %s),
// never the key it holds.
func (k AdminKey) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "{key_env:%s key_file:%s scope:%s}", k.KeyEnv, k.KeyFile, k.Scope)
}

// source says where the key comes from, for messages (never the key).
func (k *AdminKey) source() string {
	if k.KeyEnv != "" {
		return "key_env " + k.KeyEnv
	}
	return "key_file " + k.KeyFile
}

// Scopes maps each claim value of c to the scopes it grants.
func (c *AdminJWTClaim) Scopes() map[string]admin.Scope {
	m := map[string]admin.Scope{}
	for _, l := range []struct {
		vals  []string
		scope admin.Scope
	}{{c.Admin, admin.ScopeAdmin}, {c.Audit, admin.ScopeAudit}, {c.Metrics, admin.ScopeMetrics}} {
		for _, v := range l.vals {
			m[v] |= l.scope
		}
	}
	return m
}

// AdminJWTConfig returns the verifier configuration of the admin
// listener's JWTs: auth.jwt's issuers, each copying only the claim
// jwt_claim.name (and sub, for logs), with jwt_claim.audiences when set.
// Nil without jwt_claim or without auth.jwt.
func (f *File) AdminJWTConfig() *jwtauth.Config {
	c := f.Auth.JWTConfig()
	jc := f.Admin.JWTClaim
	if c == nil || jc == nil {
		return nil
	}
	claims := []string{jc.Name}
	if jc.Name != "sub" {
		claims = append(claims, "sub")
	}
	for i := range c.Issuers {
		is := &c.Issuers[i]
		// The claim is parsed as groups are (a string or an array of
		// strings, else the token is refused), and no other groups claim
		// is looked at.
		is.GroupsClaim = jc.Name
		is.Claims = claims
		if len(jc.Audiences) > 0 {
			is.Audiences = append([]string(nil), jc.Audiences...)
		}
	}
	return c
}

// applyAdminEnv applies SWITCHYARD_ADMIN (the address), adds the keys of
// SWITCHYARD_ADMIN_KEY and SWITCHYARD_ADMIN_KEY_FILE (scope admin; once,
// also when the file lists the same source) and reads
// SWITCHYARD_ADMIN_INSECURE.
func (f *File) applyAdminEnv(getenv func(string) string) {
	a := &f.Admin
	if v := getenv("SWITCHYARD_ADMIN"); v != "" {
		a.Listen = v
	}
	has := func(env, file string) bool {
		for _, k := range a.Keys {
			if k.KeyEnv == env && k.KeyFile == file {
				return true
			}
		}
		return false
	}
	if getenv(EnvAdminKey) != "" && !has(EnvAdminKey, "") {
		a.Keys = append(a.Keys, AdminKey{KeyEnv: EnvAdminKey, Scope: "admin"})
	}
	if v := getenv(EnvAdminKeyFile); v != "" && !has("", v) {
		a.Keys = append(a.Keys, AdminKey{KeyFile: v, Scope: "admin"})
	}
	if v := getenv(EnvAdminInsecure); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.envErrs = append(f.envErrs, fmt.Errorf("%s: %q is not true or false", EnvAdminInsecure, v))
		} else {
			a.Insecure = b
		}
	}
}

// validateAdmin checks the admin section's shape: the address, each
// key's scope and source, the JWT claim (a name, values, auth.jwt
// issuers to verify with). Keys themselves are checked by
// validateAdminKeys.
func (f *File) validateAdmin() []error {
	var errs []error
	a := &f.Admin
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("admin: "+format, args...)) }
	if a.Listen != "" {
		if _, _, err := net.SplitHostPort(a.Listen); err != nil {
			bad("%q is not host:port", a.Listen)
		}
	}
	for i := range a.Keys {
		k := &a.Keys[i]
		if _, ok := admin.ParseScope(k.Scope); !ok {
			bad("keys[%d]: scope %q is not admin, audit or metrics", i, k.Scope)
		}
		if k.keyErr != nil {
			bad("keys[%d]: %v", i, k.keyErr)
		}
		if k.KeyEnv != "" && !validEnvName(k.KeyEnv) {
			bad("keys[%d]: key_env: %q is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", i, k.KeyEnv)
		}
	}
	if c := a.JWTClaim; c != nil {
		if c.Name == "" {
			bad("jwt_claim.name: required (the claim whose values grant scopes)")
		}
		if len(c.Admin)+len(c.Audit)+len(c.Metrics) == 0 {
			bad("jwt_claim: list the claim values granting admin, audit or metrics")
		}
		for _, l := range []struct {
			name string
			vals []string
		}{{"admin", c.Admin}, {"audit", c.Audit}, {"metrics", c.Metrics}, {"audiences", c.Audiences}} {
			for j, v := range l.vals {
				if v == "" {
					bad("jwt_claim.%s[%d]: empty", l.name, j)
				}
			}
		}
		if f.Auth.JWT == nil || len(f.Auth.JWT.Issuers) == 0 {
			bad("jwt_claim: needs auth.jwt.issuers to verify tokens with")
		}
	}
	return errs
}

// validateAdminKeys checks every admin key that could be read: a
// Switchyard API key, not listed twice, and not one of api_keys (a
// tenant's key must not open the admin listener). Messages never include
// a key.
func (f *File) validateAdminKeys() []error {
	var errs []error
	tenantKeys := map[string]int{}
	for i := range f.APIKeys {
		if id, _, ok := apikey.Parse(f.APIKeys[i].key); ok {
			tenantKeys[id] = i
		}
	}
	ids := map[string]int{}
	for i := range f.Admin.Keys {
		k := &f.Admin.Keys[i]
		if k.key == "" || k.keyErr != nil {
			continue
		}
		id, _, ok := apikey.Parse(k.key)
		if !ok {
			errs = append(errs, fmt.Errorf("admin: keys[%d]: %s: not a Switchyard API key (%s...; make one with switchyard keygen)", i, k.source(), apikey.Prefix))
			continue
		}
		if j, dup := ids[id]; dup {
			errs = append(errs, fmt.Errorf("admin: keys[%d]: %s: the same key as admin.keys[%d]", i, k.source(), j))
		}
		ids[id] = i
		if j, dup := tenantKeys[id]; dup {
			errs = append(errs, fmt.Errorf("admin: keys[%d]: %s: the same key as api_keys[%d] (a tenant's key): use a key of its own", i, k.source(), j))
		}
	}
	return errs
}
