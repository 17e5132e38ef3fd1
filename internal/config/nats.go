package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// NATSFile is how a process connects to NATS: the `nats:` key, either a
// plain URL string (comma-separated for several servers) or a mapping:
//
//	nats:
//	  url: tls://nats-1:4222,tls://nats-2:4222
//	  creds: /etc/switchyard/nats/edge.creds   # or a directory of <identity>.creds
//	  ca: /etc/switchyard/nats/ca.pem          # the CA of the server's certificate
//	  cert: /etc/switchyard/nats/edge-cert.pem # a client certificate (opt-in)
//	  key: /etc/switchyard/nats/edge-key.pem
//
// Environment: SWITCHYARD_NATS, SWITCHYARD_NATS_CREDS, SWITCHYARD_NATS_CA,
// SWITCHYARD_NATS_CERT, SWITCHYARD_NATS_KEY, SWITCHYARD_NATS_AUDIT_CREDS;
// flags --nats, --nats-creds,
// --nats-ca, --nats-cert, --nats-key. Files are read when connecting (and
// again on each reconnect, so rotated credentials are picked up); their
// contents are never printed. The URL is printed with any user
// information (a password or token) redacted ([RedactURL]).
type NATSFile struct {
	// URL is the server URL, or several comma-separated. Default
	// nats://127.0.0.1:4222; ignored by `switchyard dev`.
	URL string `yaml:"url"`
	// Creds is a user credentials file (JWT and seed, from `switchyard
	// nats init`), or a directory holding one per identity
	// (<dir>/<identity>.creds), from which each role takes its own.
	// Empty: no credentials.
	Creds string `yaml:"creds"`
	// CA is a PEM file of the CA(s) the server's certificate must chain
	// to; setting it requires TLS. Empty: the system's roots (TLS is then
	// used only if the URL says tls:// or the server requires it).
	CA string `yaml:"ca"`
	// Cert and Key are a client certificate and its key (PEM), for a
	// server that verifies client certificates. Both or neither.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// AuditCreds are the audit identity's credentials, with which the
	// admin listener's /audit/ search reads the audit stream (only the
	// audit and admin identities may). Empty: <Creds>/audit.creds when
	// Creds is a directory; without credentials at all, the role's own
	// connection (an unauthenticated server).
	AuditCreds string `yaml:"audit_creds"`
	// Replicas is how many copies of each KV bucket a NATS cluster keeps
	// (1..5), when tenancy-svc or switchyard nats provision creates it. 0:
	// 3 on a cluster of 3 or more nodes, else 1. An existing bucket keeps
	// its count until switchyard nats provision --update.
	Replicas int `yaml:"replicas"`
}

// natsKeys are the keys of the mapping form.
var natsKeys = map[string]bool{"url": true, "creds": true, "ca": true, "cert": true, "key": true, "audit_creds": true, "replicas": true}

// UnmarshalYAML takes a URL string or the mapping form, rejecting
// unknown keys.
func (n *NATSFile) UnmarshalYAML(node *yaml.Node) error {
	switch node.Kind {
	case yaml.ScalarNode:
		var s string
		if err := node.Decode(&s); err != nil {
			return fmt.Errorf("line %d: nats: %w", node.Line, err)
		}
		*n = NATSFile{URL: s}
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			if k := node.Content[i].Value; !natsKeys[k] {
				return fmt.Errorf("line %d: field %s not found in type config.NATSFile", node.Content[i].Line, k)
			}
		}
		type plain NATSFile
		var p plain
		if err := node.Decode(&p); err != nil {
			return err
		}
		*n = NATSFile(p)
		return nil
	}
	return fmt.Errorf("line %d: nats: must be a URL or a mapping (url, creds, ca, cert, key)", node.Line)
}

// MarshalYAML prints the mapping form with the URL redacted.
func (n NATSFile) MarshalYAML() (any, error) {
	type plain NATSFile
	p := plain(n)
	p.URL = RedactURL(n.URL)
	return p, nil
}

// applyEnv overrides n from the SWITCHYARD_NATS* variables.
func (n *NATSFile) applyEnv(getenv func(string) string) {
	for _, e := range []struct {
		name string
		to   *string
	}{
		{"SWITCHYARD_NATS", &n.URL},
		{"SWITCHYARD_NATS_CREDS", &n.Creds},
		{"SWITCHYARD_NATS_CA", &n.CA},
		{"SWITCHYARD_NATS_CERT", &n.Cert},
		{"SWITCHYARD_NATS_KEY", &n.Key},
		{"SWITCHYARD_NATS_AUDIT_CREDS", &n.AuditCreds},
	} {
		if v := getenv(e.name); v != "" {
			*e.to = v
		}
	}
}

// validate reports the section's problems (never a URL's user
// information).
func (n *NATSFile) validate() []error {
	var errs []error
	for i, s := range strings.Split(n.URL, ",") {
		if n.URL == "" {
			break // the default
		}
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			errs = append(errs, fmt.Errorf("nats.url: server %d (%s) is not a URL like nats://host:4222", i+1, RedactURL(strings.TrimSpace(s))))
			continue
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			errs = append(errs, fmt.Errorf("nats.url: server %d has scheme %q; use nats://, tls://, ws:// or wss://", i+1, u.Scheme))
		}
	}
	if n.Replicas < 0 || n.Replicas > 5 {
		errs = append(errs, fmt.Errorf("nats.replicas: must be 0 (automatic) or 1..5, got %d", n.Replicas))
	}
	if (n.Cert == "") != (n.Key == "") {
		errs = append(errs, errors.New("nats.cert and nats.key: set both or neither"))
	}
	// The files are not checked here: each role reads them when it
	// connects (naming the file it could not read), and --check-config
	// must work on a host where they are mounted elsewhere.
	return errs
}

// RedactURL returns a NATS URL list (comma-separated) with the user
// information of each URL (user:password, or a token) replaced, so it can
// be printed. A part that does not parse is replaced whole.
func RedactURL(s string) string {
	if s == "" {
		return ""
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactPart(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// redactPart redacts one URL: whatever precedes its last '@' after the
// scheme (user information, however it parses: "tls://s3cr/et@host" is
// a host "s3cr" to url.Parse), or all of it when it has an '@' but no
// "scheme://" ("user:pass@host" parses as an opaque URL of scheme
// "user").
func redactPart(p string) string {
	at := strings.LastIndexByte(p, '@')
	if at < 0 {
		return p
	}
	scheme, rest, ok := strings.Cut(p, "://")
	if !ok || strings.IndexByte(rest, '@') < 0 {
		return "<redacted>"
	}
	return scheme + "://redacted" + rest[strings.LastIndexByte(rest, '@'):]
}

// RedactHTTPURL returns an upstream's URL for printing: its user
// information and its query (where tokens are put) replaced. A URL that
// does not parse is replaced whole.
func RedactHTTPURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<redacted>"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	return u.String()
}
