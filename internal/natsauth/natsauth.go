// Package natsauth makes and keeps a deployment's NATS authentication
// material: an operator, a system account and one application account
// (decentralised JWT auth, the server's MEMORY resolver), one user per
// identity ([proto.Identities]) whose permissions are computed from
// [proto.AccessTable], and the TLS certificates of the server.
//
// `switchyard nats init DIR` writes it ([Generate], [Material.WriteDir]);
// `switchyard nats --auth DIR` serves with it ([ServerOptions]);
// `switchyard nats rotate DIR <identity>` replaces one identity's key and
// revokes the old one ([Material.Rotate]); `switchyard dev` makes one in
// memory for its in-process connections.
//
// # Files
//
//	DIR/auth.conf            the server's authorization (operator, resolver preload): public
//	DIR/<identity>.creds     one user's JWT and seed (0600): give each role only its own
//	DIR/ca.pem               the CA that signed the server certificate (clients trust it)
//	DIR/server-cert.pem      the server certificate (127.0.0.1, localhost, --host names)
//	DIR/server-key.pem       its key (0600)
//	DIR/keys/                the operator, account and CA signing keys (0600): keep offline;
//	                         needed only to rotate credentials and issue certificates
//
// Nothing here logs or prints a seed; errors name files, never their
// contents.
package natsauth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/switchyard-mcp/switchyard/proto"
)

// MaxControlLine is the server's max_control_line that auth.conf sets:
// room for a CONNECT line with the largest identity's JWT.
const MaxControlLine = 16 << 10

// AccountName is the name of the application account every identity
// belongs to.
const AccountName = "SWITCHYARD"

// User is one identity's credentials.
type User struct {
	// JWT is the user JWT, signed by the account, carrying the identity's
	// permissions.
	JWT string
	// Seed is the user's nkey seed (secret).
	Seed []byte
}

// PublicKey returns the user's public nkey.
func (u User) PublicKey() (string, error) {
	kp, err := nkeys.FromSeed(u.Seed)
	if err != nil {
		return "", errors.New("natsauth: user seed is invalid")
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// Creds returns the user's credentials file (nats.go UserCredentials).
func (u User) Creds() ([]byte, error) { return jwt.FormatUserConfig(u.JWT, u.Seed) }

// Material is a deployment's authentication material. Not safe for
// concurrent mutation.
type Material struct {
	// Params are the deployment settings the permissions depend on.
	Params proto.AccessParams

	OperatorSeed []byte
	OperatorJWT  string
	SystemSeed   []byte
	SystemJWT    string
	AccountSeed  []byte
	AccountJWT   string
	Users        map[proto.Identity]User
}

// Generate makes new material for p: new operator, accounts and a user per
// identity.
func Generate(p proto.AccessParams) (*Material, error) {
	m := &Material{Params: p, Users: map[proto.Identity]User{}}
	okp, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	defer okp.Wipe()
	if m.OperatorSeed, err = seedOf(okp); err != nil {
		return nil, err
	}
	skp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, err
	}
	defer skp.Wipe()
	if m.SystemSeed, err = seedOf(skp); err != nil {
		return nil, err
	}
	spub, _ := skp.PublicKey()
	akp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, err
	}
	defer akp.Wipe()
	if m.AccountSeed, err = seedOf(akp); err != nil {
		return nil, err
	}
	apub, _ := akp.PublicKey()

	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "switchyard"
	oc.SystemAccount = spub
	if m.OperatorJWT, err = oc.Encode(okp); err != nil {
		return nil, fmt.Errorf("natsauth: operator jwt: %w", err)
	}
	sc := jwt.NewAccountClaims(spub)
	sc.Name = "SYS"
	if m.SystemJWT, err = sc.Encode(okp); err != nil {
		return nil, fmt.Errorf("natsauth: system account jwt: %w", err)
	}
	ac := jwt.NewAccountClaims(apub)
	ac.Name = AccountName
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
		MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit,
		Consumer: jwt.NoLimit, MaxAckPending: jwt.NoLimit,
		MemoryMaxStreamBytes: jwt.NoLimit, DiskMaxStreamBytes: jwt.NoLimit,
	}
	if m.AccountJWT, err = ac.Encode(okp); err != nil {
		return nil, fmt.Errorf("natsauth: account jwt: %w", err)
	}
	for _, id := range proto.Identities {
		if err := m.issue(id); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// UserPermissions returns the NATS permissions of id under p: exactly the
// patterns [proto.Permissions] computes, everything else denied.
func UserPermissions(id proto.Identity, p proto.AccessParams) jwt.Permissions {
	pub, sub := proto.Permissions(id, p)
	var perms jwt.Permissions
	perms.Pub.Allow.Add(pub...)
	perms.Sub.Allow.Add(sub...)
	return perms
}

// issue makes a new key and JWT for id, signed by the account.
func (m *Material) issue(id proto.Identity) error {
	if !proto.ValidIdentity(id) {
		return fmt.Errorf("natsauth: unknown identity %q", id)
	}
	akp, err := nkeys.FromSeed(m.AccountSeed)
	if err != nil {
		return errors.New("natsauth: account seed is invalid")
	}
	defer akp.Wipe()
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	defer ukp.Wipe()
	upub, _ := ukp.PublicKey()
	seed, err := seedOf(ukp)
	if err != nil {
		return err
	}
	uc := jwt.NewUserClaims(upub)
	uc.Name = string(id)
	uc.Permissions = UserPermissions(id, m.Params)
	tok, err := uc.Encode(akp)
	if err != nil {
		return fmt.Errorf("natsauth: user jwt %s: %w", id, err)
	}
	m.Users[id] = User{JWT: tok, Seed: seed}
	return nil
}

// Rotate gives id a new key and a JWT with the current permissions, and
// revokes every JWT of its old key in the account (re-signed by the
// operator). The server learns of the revocation when it reloads
// auth.conf; connections with the old key are then closed and refused.
func (m *Material) Rotate(id proto.Identity) error {
	old, ok := m.Users[id]
	if !ok {
		return fmt.Errorf("natsauth: unknown identity %q", id)
	}
	oldPub, err := old.PublicKey()
	if err != nil {
		return err
	}
	if err := m.issue(id); err != nil {
		return err
	}
	return m.revoke(oldPub)
}

// Revoked reports whether the account revokes JWTs of user key pub.
func (m *Material) Revoked(pub string) bool {
	ac, err := jwt.DecodeAccountClaims(m.AccountJWT)
	if err != nil {
		return false
	}
	_, ok := ac.Revocations[pub]
	return ok
}

// revoke revokes every JWT of user key pub issued until now.
func (m *Material) revoke(pub string) error {
	ac, err := jwt.DecodeAccountClaims(m.AccountJWT)
	if err != nil {
		return fmt.Errorf("natsauth: account jwt: %w", err)
	}
	ac.RevokeAt(pub, time.Now())
	okp, err := nkeys.FromSeed(m.OperatorSeed)
	if err != nil {
		return errors.New("natsauth: operator seed is invalid")
	}
	defer okp.Wipe()
	if m.AccountJWT, err = ac.Encode(okp); err != nil {
		return fmt.Errorf("natsauth: account jwt: %w", err)
	}
	return nil
}

// AccountPublicKey returns the application account's public key.
func (m *Material) AccountPublicKey() (string, error) { return publicOf(m.AccountSeed) }

// SystemPublicKey returns the system account's public key.
func (m *Material) SystemPublicKey() (string, error) { return publicOf(m.SystemSeed) }

// seedOf returns a copy of kp's seed: Wipe overwrites the key pair's own.
func seedOf(kp nkeys.KeyPair) ([]byte, error) {
	s, err := kp.Seed()
	return append([]byte(nil), s...), err
}

func publicOf(seed []byte) (string, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return "", errors.New("natsauth: seed is invalid")
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// ServerConfig returns the server's authorization configuration
// (nats-server config syntax): the operator JWT inline, the system
// account, and the MEMORY resolver preloaded with both accounts' JWTs. It
// holds no secret.
func (m *Material) ServerConfig() (string, error) {
	spub, err := m.SystemPublicKey()
	if err != nil {
		return "", err
	}
	apub, err := m.AccountPublicKey()
	if err != nil {
		return "", err
	}
	ids := make([]string, 0, len(m.Users))
	for id := range m.Users {
		ids = append(ids, string(id))
	}
	slices.Sort(ids)
	return fmt.Sprintf(`# Switchyard's NATS authorization, written by switchyard nats init/rotate.
# Operator mode: one account (%s) whose users are the identities
# %v, each with the permissions of Switchyard's
# permission table (docs/security.md). No secret is in this file.
# switchyard nats --auth DIR reloads it when it changes; a plain
# nats-server reloads it on SIGHUP.
operator: %q
system_account: %s
# Clients present their user JWT (permissions included, up to ~5 KB) in
# the CONNECT line: above the default limit of 4 KB.
max_control_line: %d
resolver: MEMORY
resolver_preload: {
  %s: %q
  %s: %q
}
`, AccountName, ids, m.OperatorJWT, spub, MaxControlLine, spub, m.SystemJWT, apub, m.AccountJWT), nil
}

// TableMarkdown renders [proto.AccessTable](p) as the Markdown table of
// docs/security.md: one row per access, with the identities and the NATS
// subject patterns it grants.
func TableMarkdown(p proto.AccessParams) string {
	var b strings.Builder
	b.WriteString("| resource | verb | who | NATS subjects (pub: publish, sub: subscribe) | why |\n|---|---|---|---|---|\n")
	for _, a := range proto.AccessTable(p) {
		who := make([]string, len(a.Who))
		for i, id := range a.Who {
			who[i] = string(id)
		}
		var subj []string
		for _, s := range a.Pub {
			subj = append(subj, "pub `"+s+"`")
		}
		for _, s := range a.Sub {
			subj = append(subj, "sub `"+s+"`")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", strings.ReplaceAll(a.Resource, "|", "\\|"), a.Verb, strings.Join(who, ", "),
			strings.Join(subj, "<br>"), strings.ReplaceAll(a.Why, "|", "\\|"))
	}
	return b.String()
}
