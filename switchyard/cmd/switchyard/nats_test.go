package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
)

// nkeySeed matches an NKey seed (user, operator or account): "S", its
// type, then base32 to 58 characters. (Three letters such as "SAA" alone
// occur by chance in the base64 of the JWTs auth.conf holds.)
var nkeySeed = regexp.MustCompile(`S[UOA][A-Z2-7]{56}`)

func runNATSCLI(args ...string) cliResult {
	var out, errb bytes.Buffer
	var code int
	switch args[0] {
	case "init":
		code = runNATSInit(args[1:], &out, &errb)
	case "rotate":
		code = runNATSRotate(args[1:], &out, &errb)
	default:
		code = runNATSServe(args, &errb)
	}
	return cliResult{code, out.String(), errb.String()}
}

// TestNATSInit: init writes the material with secrets readable by the
// owner only, every identity's creds naming that identity, a server
// certificate for the --host names, and refuses a directory that already
// has material; its output names files, never a seed.
func TestNATSInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	r := runNATSCLI("init", dir, "--host", "nats.internal", "--host", "10.1.2.3", "--client-certs")
	if r.code != 0 {
		t.Fatalf("init: exit %d: %s", r.code, r.stderr)
	}
	if nkeySeed.MatchString(r.stdout + r.stderr) {
		t.Fatalf("init printed a seed:\n%s%s", r.stdout, r.stderr)
	}
	for _, id := range proto.Identities {
		p := filepath.Join(dir, natsauth.CredsFile(id))
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v", p, err, st.Mode())
		}
		b, _ := os.ReadFile(p)
		if got, err := natsauth.CredsIdentity(b); err != nil || got != id {
			t.Fatalf("%s names %q (%v)", p, got, err)
		}
		cert, key := natsauth.ClientCertFiles(id)
		for _, f := range []string{cert, key} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Fatalf("--client-certs: %v", err)
			}
		}
	}
	for _, f := range []string{natsauth.FileServerKey, "keys/operator.nk", "keys/account.nk", "keys/system.nk", "keys/ca-key.pem"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v: want 0600", f, err, st.Mode())
		}
	}
	if st, err := os.Stat(filepath.Join(dir, natsauth.DirKeys)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("keys/: %v: want 0700", err)
	}
	conf, _ := os.ReadFile(filepath.Join(dir, natsauth.FileAuthConf))
	if nkeySeed.Match(conf) {
		t.Fatal("auth.conf holds a seed")
	}
	// The certificate is valid for the names asked and for loopback.
	ca, _ := os.ReadFile(filepath.Join(dir, natsauth.FileCA))
	certPEM, _ := os.ReadFile(filepath.Join(dir, natsauth.FileServerCert))
	for _, h := range []string{"nats.internal", "10.1.2.3", "127.0.0.1", "localhost"} {
		if err := verifyHost(ca, certPEM, h); err != nil {
			t.Errorf("certificate for %s: %v", h, err)
		}
	}
	if err := verifyHost(ca, certPEM, "evil.example"); err == nil {
		t.Error("certificate valid for a name not asked for")
	}
	if r := runNATSCLI("init", dir); r.code == 0 || !strings.Contains(r.stderr, "already") {
		t.Fatalf("init over existing material: exit %d: %s", r.code, r.stderr)
	}
}

// TestNATSRotate: rotate replaces exactly the identity's creds (a new
// key), revokes the old key in auth.conf, and refuses unknown identities.
func TestNATSRotate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	if r := runNATSCLI("init", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	read := func(id proto.Identity) []byte {
		b, err := os.ReadFile(filepath.Join(dir, natsauth.CredsFile(id)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	oldEdge, oldRouter := read(proto.IdentityEdge), read(proto.IdentityRouter)
	oldConf, _ := os.ReadFile(filepath.Join(dir, natsauth.FileAuthConf))
	if r := runNATSCLI("rotate", dir, "edge"); r.code != 0 {
		t.Fatalf("rotate: exit %d: %s", r.code, r.stderr)
	}
	if bytes.Equal(read(proto.IdentityEdge), oldEdge) || !bytes.Equal(read(proto.IdentityRouter), oldRouter) {
		t.Fatal("rotate edge did not replace exactly edge's creds")
	}
	conf, _ := os.ReadFile(filepath.Join(dir, natsauth.FileAuthConf))
	if bytes.Equal(conf, oldConf) {
		t.Fatal("auth.conf unchanged: the old key is not revoked")
	}
	u, err := natsauth.ParseCreds(oldEdge)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := u.PublicKey()
	m, err := natsauth.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Revoked(pub) {
		t.Fatal("the old edge key is not revoked in the account")
	}
	if r := runNATSCLI("rotate", dir, "root"); r.code != 2 {
		t.Fatalf("rotate of an unknown identity: exit %d", r.code)
	}
}

// TestNATSServeRefusesInsecure: without --auth, a non-loopback address
// is refused unless --insecure; a missing auth directory is an error.
func TestNATSServeRefusesInsecure(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "10.255.255.1:4222"} {
		r := runNATSCLI("--addr", addr, "--store", t.TempDir())
		if r.code != 2 || !strings.Contains(r.stderr, "without authentication") {
			t.Fatalf("%s: exit %d: %s", addr, r.code, r.stderr)
		}
	}
	r := runNATSCLI("--auth", filepath.Join(t.TempDir(), "missing"), "--addr", "127.0.0.1:0", "--store", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "switchyard nats init") {
		t.Fatalf("missing auth dir: exit %d: %s", r.code, r.stderr)
	}
}

// verifyHost checks that certPEM chains to caPEM and is valid for host.
func verifyHost(caPEM, certPEM []byte, host string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("no CA")
	}
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return errors.New("no certificate")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return err
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// TestNATSCert: cert issues a new server certificate from the same CA,
// valid for the names asked now (and loopback), not the old ones.
func TestNATSCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	if r := runNATSCLI("init", dir, "--host", "old.example"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	old, _ := os.ReadFile(filepath.Join(dir, natsauth.FileServerCert))
	var out, errb bytes.Buffer
	if code := runNATSCert([]string{dir, "--host", "nats.example"}, &out, &errb); code != 0 {
		t.Fatalf("cert: exit %d: %s", code, errb.String())
	}
	ca, _ := os.ReadFile(filepath.Join(dir, natsauth.FileCA))
	cert, _ := os.ReadFile(filepath.Join(dir, natsauth.FileServerCert))
	if bytes.Equal(cert, old) {
		t.Fatal("the certificate was not replaced")
	}
	for h, want := range map[string]bool{"nats.example": true, "127.0.0.1": true, "::1": true, "localhost": true, "old.example": false} {
		if err := verifyHost(ca, cert, h); (err == nil) != want {
			t.Errorf("new certificate for %s: %v, want valid %v", h, err, want)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, natsauth.FileServerKey)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("server key: %v", err)
	}
	if code := runNATSCert([]string{filepath.Join(t.TempDir(), "none")}, &out, &errb); code != 1 {
		t.Fatalf("cert without a CA: exit %d", code)
	}
}

// TestNATSServeClusterRefusals: cluster routes off loopback need --auth
// (or --insecure); --sync takes always or a positive duration; init
// writes a route secret readable by the owner only.
func TestNATSServeClusterRefusals(t *testing.T) {
	r := runNATSCLI("--addr", "127.0.0.1:0", "--store", t.TempDir(), "--cluster", "0.0.0.0:0")
	if r.code != 2 || !strings.Contains(r.stderr, "refusing cluster routes") {
		t.Fatalf("unauthenticated routes: exit %d: %s", r.code, r.stderr)
	}
	for _, bad := range []string{"sometimes", "-1s", "0s"} {
		if r := runNATSCLI("--addr", "127.0.0.1:0", "--store", t.TempDir(), "--sync", bad); r.code != 2 || !strings.Contains(r.stderr, "--sync") {
			t.Fatalf("--sync %s: exit %d: %s", bad, r.code, r.stderr)
		}
	}
	dir := filepath.Join(t.TempDir(), "auth")
	if r = runNATSCLI("init", dir); r.code != 0 {
		t.Fatalf("init: %s", r.stderr)
	}
	st, err := os.Stat(filepath.Join(dir, natsauth.FileRouteSecret))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("route secret: %v %v", err, st)
	}
	s, err := natsauth.RouteSecret(dir)
	if err != nil || len(s) < 32 || strings.Contains(r.stdout+r.stderr, s) {
		t.Fatalf("route secret %q: %v", s, err)
	}
}
