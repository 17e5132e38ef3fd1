package natsauth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/jwt/v2"

	"github.com/switchyard-mcp/switchyard/proto"
)

// File names in an auth directory.
const (
	FileAuthConf   = "auth.conf"
	FileCA         = "ca.pem"
	FileServerCert = "server-cert.pem"
	FileServerKey  = "server-key.pem"
	FileParams     = "access.json"
	// FileRouteSecret is the password the nodes of a NATS cluster present
	// to each other's routes (the same on every node: copy the directory).
	FileRouteSecret = "route.secret"
	DirKeys         = "keys"
	fileOperatorNK  = "operator.nk"
	fileSystemNK    = "system.nk"
	fileAccountNK   = "account.nk"
	fileCAKey       = "ca-key.pem"
	fileOperator    = "operator.jwt"
	fileSystem      = "system.jwt"
	fileAccount     = "account.jwt"
)

// CredsFile is the name of id's credentials file: "<id>.creds".
func CredsFile(id proto.Identity) string { return string(id) + ".creds" }

// ClientCertFiles are the names of id's client certificate and key.
func ClientCertFiles(id proto.Identity) (cert, key string) {
	return string(id) + "-cert.pem", string(id) + "-key.pem"
}

// ErrExists is returned by [Init] for a directory that already holds
// material.
var ErrExists = errors.New("natsauth: the directory already holds NATS auth material (rotate credentials with switchyard nats rotate)")

// InitOptions configure [Init].
type InitOptions struct {
	// Params are the deployment settings the permissions depend on.
	Params proto.AccessParams
	// Hosts are names and addresses the server certificate is valid for,
	// besides [DefaultHosts].
	Hosts []string
	// ClientCerts also issues a client certificate per identity.
	ClientCerts bool
}

// Init generates new material and writes it, with a new CA and server
// certificate, into dir (created 0700 if missing). It refuses a directory
// that already has an auth.conf ([ErrExists]).
func Init(dir string, o InitOptions) (*Material, error) {
	if _, err := os.Stat(filepath.Join(dir, FileAuthConf)); err == nil {
		return nil, ErrExists
	}
	m, err := Generate(o.Params)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, DirKeys), 0o700); err != nil {
		return nil, err
	}
	ca, err := NewCA("Switchyard NATS CA")
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.IssueServer(o.Hosts)
	if err != nil {
		return nil, err
	}
	files := []struct {
		name   string
		data   []byte
		secret bool
	}{
		{FileCA, ca.CertPEM, false},
		{filepath.Join(DirKeys, fileCAKey), ca.KeyPEM, true},
		{FileServerCert, cert, false},
		{FileServerKey, key, true},
		{FileRouteSecret, []byte(routeSecret()), true},
	}
	if o.ClientCerts {
		for _, id := range proto.Identities {
			c, k, err := ca.IssueClient(string(id))
			if err != nil {
				return nil, err
			}
			cf, kf := ClientCertFiles(id)
			files = append(files, struct {
				name   string
				data   []byte
				secret bool
			}{cf, c, false}, struct {
				name   string
				data   []byte
				secret bool
			}{kf, k, true})
		}
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.name), f.data, f.secret); err != nil {
			return nil, err
		}
	}
	return m, m.WriteDir(dir)
}

// WriteDir writes m's files into dir: auth.conf, the accounts' JWTs, the
// signing keys under keys/, access.json and every identity's creds.
// Each file is replaced atomically (written aside, then renamed).
func (m *Material) WriteDir(dir string) error {
	conf, err := m.ServerConfig()
	if err != nil {
		return err
	}
	params, err := json.Marshal(struct {
		AuditStream string `json:"audit_stream,omitempty"`
	}{m.Params.AuditStream})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, DirKeys), 0o700); err != nil {
		return err
	}
	files := []struct {
		name   string
		data   []byte
		secret bool
	}{
		{filepath.Join(DirKeys, fileOperatorNK), m.OperatorSeed, true},
		{filepath.Join(DirKeys, fileSystemNK), m.SystemSeed, true},
		{filepath.Join(DirKeys, fileAccountNK), m.AccountSeed, true},
		{fileOperator, []byte(m.OperatorJWT), false},
		{fileSystem, []byte(m.SystemJWT), false},
		{fileAccount, []byte(m.AccountJWT), false},
		{FileParams, params, false},
	}
	for _, id := range proto.Identities {
		u, ok := m.Users[id]
		if !ok {
			continue
		}
		creds, err := u.Creds()
		if err != nil {
			return fmt.Errorf("natsauth: creds %s: %w", id, err)
		}
		files = append(files, struct {
			name   string
			data   []byte
			secret bool
		}{CredsFile(id), creds, true})
	}
	// auth.conf last: its presence says the directory is complete.
	files = append(files, struct {
		name   string
		data   []byte
		secret bool
	}{FileAuthConf, []byte(conf), false})
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.name), f.data, f.secret); err != nil {
			return err
		}
	}
	return nil
}

// LoadDir reads the material [Init] wrote into dir.
func LoadDir(dir string) (*Material, error) {
	m := &Material{Users: map[proto.Identity]User{}}
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("natsauth: %w", err)
		}
		return b, nil
	}
	var err error
	if m.OperatorSeed, err = read(filepath.Join(DirKeys, fileOperatorNK)); err != nil {
		return nil, err
	}
	if m.SystemSeed, err = read(filepath.Join(DirKeys, fileSystemNK)); err != nil {
		return nil, err
	}
	if m.AccountSeed, err = read(filepath.Join(DirKeys, fileAccountNK)); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		to   *string
	}{{fileOperator, &m.OperatorJWT}, {fileSystem, &m.SystemJWT}, {fileAccount, &m.AccountJWT}} {
		b, err := read(f.name)
		if err != nil {
			return nil, err
		}
		*f.to = strings.TrimSpace(string(b))
	}
	if b, err := read(FileParams); err == nil {
		var p struct {
			AuditStream string `json:"audit_stream"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("natsauth: %s: %w", FileParams, err)
		}
		m.Params.AuditStream = p.AuditStream
	}
	for _, id := range proto.Identities {
		b, err := os.ReadFile(filepath.Join(dir, CredsFile(id)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("natsauth: %w", err)
		}
		u, err := ParseCreds(b)
		if err != nil {
			return nil, fmt.Errorf("natsauth: %s: %w", CredsFile(id), err)
		}
		m.Users[id] = u
	}
	return m, nil
}

// ParseCreds parses a credentials file.
func ParseCreds(b []byte) (User, error) {
	tok, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return User{}, errors.New("no user JWT")
	}
	kp, err := jwt.ParseDecoratedUserNKey(b)
	if err != nil {
		return User{}, errors.New("no user seed")
	}
	defer kp.Wipe()
	seed, err := seedOf(kp)
	if err != nil {
		return User{}, errors.New("no user seed")
	}
	return User{JWT: tok, Seed: seed}, nil
}

// CredsIdentity returns the identity named in the user JWT of a
// credentials file (its "name" claim), without checking signatures.
func CredsIdentity(b []byte) (proto.Identity, error) {
	tok, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return "", errors.New("natsauth: no user JWT in the credentials")
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return "", errors.New("natsauth: the credentials' user JWT is invalid")
	}
	return proto.Identity(uc.Name), nil
}

// RotateDir gives id in dir a new key (revoking the old one), rewrites its
// creds and auth.conf, and returns the material. A server serving dir
// (switchyard nats --auth) picks up the change by itself; a plain
// nats-server on SIGHUP.
func RotateDir(dir string, id proto.Identity) (*Material, error) {
	m, err := LoadDir(dir)
	if err != nil {
		return nil, err
	}
	if err := m.Rotate(id); err != nil {
		return nil, err
	}
	return m, m.WriteDir(dir)
}

// routeSecret is a new random route password (URL-safe).
func routeSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// RouteSecret returns dir's route password ([FileRouteSecret]).
func RouteSecret(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileRouteSecret))
	if err != nil {
		return "", fmt.Errorf("route secret: %w (switchyard nats cert %s creates it in a directory made before clusters)", err, dir)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < 16 {
		return "", fmt.Errorf("route secret %s: shorter than 16 characters", filepath.Join(dir, FileRouteSecret))
	}
	return s, nil
}

// EnsureRouteSecret creates dir's route password if it has none.
func EnsureRouteSecret(dir string) error {
	p := filepath.Join(dir, FileRouteSecret)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	return writeFile(p, []byte(routeSecret()), true)
}

func writeFile(path string, data []byte, secret bool) error {
	mode := os.FileMode(0o644)
	if secret {
		mode = 0o600
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("natsauth: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("natsauth: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("natsauth: write %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("natsauth: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("natsauth: %w", err)
	}
	return nil
}

// RenewServerCert issues a new server certificate and key into dir from
// its CA (ca.pem and keys/ca-key.pem), valid for hosts and
// [DefaultHosts].
func RenewServerCert(dir string, hosts []string) error {
	certPEM, err := os.ReadFile(filepath.Join(dir, FileCA))
	if err != nil {
		return fmt.Errorf("natsauth: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, DirKeys, fileCAKey))
	if err != nil {
		return fmt.Errorf("natsauth: %w", err)
	}
	defer clear(keyPEM)
	ca, err := LoadCA(certPEM, keyPEM)
	if err != nil {
		return err
	}
	cert, key, err := ca.IssueServer(hosts)
	if err != nil {
		return err
	}
	defer clear(key)
	if err := writeFile(filepath.Join(dir, FileServerKey), key, true); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, FileServerCert), cert, false)
}
