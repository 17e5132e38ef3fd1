package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
)

// CredsFor returns the credentials file n gives identity want (its own
// file when n.Creds is a directory: <dir>/<want>.creds) and the identity
// named in it. With no credentials configured it returns "" and want. A
// file of another identity than want or one of also is an error: a role
// started with another role's credentials would fail on every subject.
func CredsFor(n config.NATSFile, want proto.Identity, also ...proto.Identity) (string, proto.Identity, error) {
	if n.Creds == "" {
		return "", want, nil
	}
	path := n.Creds
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, natsauth.CredsFile(want))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("nats credentials: %w", err)
	}
	id, err := natsauth.CredsIdentity(b)
	clear(b)
	if err != nil {
		return "", "", fmt.Errorf("nats credentials %s: %w", path, err)
	}
	if id != want && !slices.Contains(also, id) {
		return "", "", fmt.Errorf("nats credentials %s are %q's, not %q's: give each process its own identity's creds (switchyard nats init writes <dir>/%s)", path, id, want, natsauth.CredsFile(want))
	}
	return path, id, nil
}

// NATSOptions returns the connection options of identity want (and the
// identity the credentials name, which may be one of also) from n:
// credentials, TLS, the identity's inbox prefix (so replies arrive under
// _INBOX.<identity>., the only inbox its permissions let it read), and
// handlers that log disconnections and asynchronous errors, permission
// violations among them. name is the connection name servers show.
func NATSOptions(n config.NATSFile, want proto.Identity, name string, log *slog.Logger, also ...proto.Identity) ([]nats.Option, proto.Identity, error) {
	creds, id, err := CredsFor(n, want, also...)
	if err != nil {
		return nil, "", err
	}
	opts := IdentityOptions(id, name, log)
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if n.CA != "" {
		opts = append(opts, nats.RootCAs(n.CA))
	}
	if n.Cert != "" {
		opts = append(opts, nats.ClientCert(n.Cert, n.Key))
	}
	return opts, id, nil
}

// IdentityOptions are the options every connection of identity id gets:
// its name, id's inbox prefix and an error handler that logs asynchronous
// errors, permission violations at error level.
func IdentityOptions(id proto.Identity, name string, log *slog.Logger) []nats.Option {
	return []nats.Option{
		nats.Name(name),
		nats.CustomInboxPrefix(id.InboxPrefix()),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			if errors.Is(err, nats.ErrPermissionViolation) {
				log.Error("nats permission violation", "identity", string(id), proto.LogSubject, subj, proto.LogErr, err)
				return
			}
			log.Warn("nats async error", proto.LogSubject, subj, proto.LogErr, err)
		}),
	}
}

// ConnectAs dials the servers of n as identity want, or one of also as
// the credentials say (see [NATSOptions]), with reconnects forever, so a
// role survives a server restart, and a ping every second, so that it
// leaves a server it can no longer reach within ~3 s.
func ConnectAs(n config.NATSFile, want proto.Identity, log *slog.Logger, also ...proto.Identity) (*nats.Conn, error) {
	opts, _, err := NATSOptions(n, want, "switchyard-"+string(want), log, also...)
	if err != nil {
		return nil, err
	}
	var (
		lastMu sync.Mutex
		last   string // guarded by lastMu: the last reconnect failure logged
	)
	opts = append(opts,
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(true),
		// A server cut off without closing the connection (a partition,
		// a host gone) is given up on after two unanswered pings, ~2-3 s,
		// and the role moves to another node of the cluster; nats.go's
		// default waits two minutes per ping.
		nats.PingInterval(time.Second),
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", proto.LogErr, err)
			}
		}),
		// A refused credential (rotated on the server before this host's
		// file) is retried like an unreachable server, not given up on
		// after two attempts as nats.go does by default; each distinct
		// failure is logged once until a reconnect succeeds.
		nats.IgnoreAuthErrorAbort(),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return
			}
			lastMu.Lock()
			fresh := err.Error() != last
			last = err.Error()
			lastMu.Unlock()
			switch {
			case !fresh:
			case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAuthExpired):
				// The role will not work until its credentials do.
				log.Error("nats refused the credentials", "identity", string(want), proto.LogErr, err)
			default:
				log.Warn("nats reconnect failed", proto.LogErr, err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			lastMu.Lock()
			last = ""
			lastMu.Unlock()
			log.Info("nats reconnected")
		}),
	)
	return nats.Connect(n.URL, opts...)
}

// ConnectAudit returns a connection as the audit identity, for the admin
// listener's /audit/ search: with n.AuditCreds, or <n.Creds>/audit.creds
// when n.Creds is a directory, or n's own settings when it has no
// credentials (an unauthenticated server). It returns nil and no error
// when n has credentials but none for the audit identity: the search is
// then not served (the role's own identity may not read the stream).
func ConnectAudit(n config.NATSFile, log *slog.Logger) (*nats.Conn, error) {
	switch {
	case n.AuditCreds != "":
		n.Creds = n.AuditCreds
	case n.Creds == "":
	default:
		st, err := os.Stat(n.Creds)
		if err != nil || !st.IsDir() {
			return nil, nil
		}
		if _, err := os.Stat(filepath.Join(n.Creds, natsauth.CredsFile(proto.IdentityAudit))); err != nil {
			return nil, nil
		}
	}
	return ConnectAs(n, proto.IdentityAudit, log, proto.IdentityAdmin)
}
