package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/app"
	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/switchyard/internal/embedded"
	"github.com/switchyard-mcp/switchyard/switchyard/internal/roles"
)

// runDev runs every role and an embedded NATS server in this process.
// The server authenticates every connection, the roles' in-process ones
// included, with the identities of the permission table (material made
// at start, in memory); with --nats-listen the material is kept in a
// directory (--nats-auth) whose creds other processes use, over TLS.
func runDev(args []string) int {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	var f app.Flags
	f.RegisterFormat(fs, "text")
	natsAddr := fs.String("nats-listen", "", "also serve the embedded NATS on this TCP address (e.g. 127.0.0.1:4222), with credentials and TLS, so separate workers and the admin CLIs can join")
	authDir := fs.String("nats-auth", "", "with --nats-listen: the directory of the NATS credentials (created with switchyard nats init's layout if missing, reused if present and private to this user; default ~/.cache/switchyard/dev-nats-<port>)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, log, code := f.Prepare()
	if code >= 0 {
		return code
	}
	store, err := os.MkdirTemp("", "switchyard-dev-")
	if err != nil {
		log.Error("temp store", "err", err)
		return 1
	}
	defer os.RemoveAll(store)
	params := proto.AccessParams{AuditStream: cfg.Audit.StreamName()}
	nopts := embedded.Options{Addr: *natsAddr, StoreDir: store}
	var m *natsauth.Material
	if *natsAddr == "" {
		m, err = natsauth.Generate(params)
	} else {
		if *authDir == "" {
			_, port, _ := net.SplitHostPort(*natsAddr)
			*authDir = filepath.Join(userStateDir(), "dev-nats-"+port)
		}
		m, nopts.TLS, err = devAuthDir(*authDir, params)
	}
	if err == nil {
		nopts.AuthConf, err = m.ServerConfig()
	}
	if err != nil {
		log.Error("nats auth failed", "err", err)
		return 1
	}
	ns, err := embedded.Start(nopts)
	if err != nil {
		log.Error("embedded nats failed", "err", err)
		return 1
	}
	defer ns.Shutdown()
	connect := func(role string) (*nats.Conn, error) {
		id := proto.Identity(role)
		u := m.Users[id]
		opts := append(app.IdentityOptions(id, "switchyard-dev-"+role, log),
			nats.InProcessServer(ns), nats.UserJWTAndSeed(u.JWT, string(u.Seed)))
		return nats.Connect("", opts...)
	}
	set, err := roles.Build(roles.Order, cfg, connect, log)
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	defer set.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	adm, wait, err := app.StartAdmin(ctx, cfg, set.Registry, log)
	if err != nil {
		log.Error("admin listener failed", "err", err)
		return 1
	}
	if adm != nil {
		// One listener for every role: aggregated readiness.
		anc, err := connect(string(proto.IdentityAudit))
		if err != nil {
			log.Error("audit search failed", "err", err)
			return 1
		}
		defer anc.Close()
		if err := set.AddTo(adm, anc); err != nil {
			log.Error("audit search failed", "err", err)
			return 1
		}
	}
	defer func() { stop(); _ = wait() }()
	adminAddr := ""
	if adm != nil {
		adminAddr = adm.Addr()
	}
	go announce(ctx, set, *natsAddr, *authDir, adminAddr, cfg.Audit.On(), cfg.Admin.Configured())
	if err := set.Run(ctx); err != nil {
		log.Error("role failed", "err", err)
		return 1
	}
	return 0
}

// devAuthDir returns the NATS auth material of dir, writing new material
// (switchyard nats init's layout) when dir has none, and the listener's
// TLS configuration from its server certificate.
func devAuthDir(dir string, p proto.AccessParams) (*natsauth.Material, *tls.Config, error) {
	if err := privateDir(dir); err != nil {
		return nil, nil, err
	}
	m, err := natsauth.LoadDir(dir)
	if err != nil {
		if _, serr := os.Stat(filepath.Join(dir, natsauth.FileAuthConf)); serr == nil {
			return nil, nil, err // there, but unreadable: do not overwrite it
		}
		if m, err = natsauth.Init(dir, natsauth.InitOptions{Params: p}); err != nil {
			return nil, nil, err
		}
	}
	cert, err := os.ReadFile(filepath.Join(dir, natsauth.FileServerCert))
	if err != nil {
		return nil, nil, err
	}
	key, err := os.ReadFile(filepath.Join(dir, natsauth.FileServerKey))
	if err != nil {
		return nil, nil, err
	}
	c, err := natsauth.ServerTLS(cert, key, nil)
	clear(key)
	return m, c, err
}

// userStateDir is where switchyard keeps a user's own state: the user's
// cache directory (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache) under
// "switchyard", else the temporary directory (where privateDir's checks
// matter most).
func userStateDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "switchyard")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("switchyard-%d", os.Getuid()))
}

// privateDir refuses an existing dir that another user could have
// planted or can read (the default NATS store and dev's credentials when
// no cache directory exists are predictable paths under the temporary
// directory): a symlink, not a directory, owned by another user, or open
// to group or others. A missing dir is fine (Init creates
// it 0700).
func privateDir(dir string) error {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() || st.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to another user: refusing what someone else made there (remove it, or name another directory)", dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is open to other users (mode %v): chmod 700 it or remove it", dir, st.Mode().Perm())
	}
	return nil
}

// announce prints how to connect once every role is ready. audit says
// the admin listener serves the audit search, adminCreds that a
// credential is configured for it.
func announce(ctx context.Context, set *roles.Set, natsAddr, authDir, adminAddr string, audit, adminCreds bool) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !set.Ready() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	addr := set.Roles["edge"].(interface{ Addr() string }).Addr()
	fmt.Fprintf(os.Stderr, "\nSwitchyard is running (embedded NATS, all roles).\n")
	fmt.Fprintf(os.Stderr, "  federated MCP endpoint:   http://%s/mcp\n", addr)
	fmt.Fprintf(os.Stderr, "  one upstream, own names:  http://%s/mcp/<upstream>\n", addr)
	if natsAddr != "" {
		fmt.Fprintf(os.Stderr, "  NATS for extra workers:   tls://%s (credentials in %s)\n", natsAddr, authDir)
		fmt.Fprintf(os.Stderr, "    admin CLIs:  export SWITCHYARD_NATS=tls://%s SWITCHYARD_NATS_CREDS=%s SWITCHYARD_NATS_CA=%s\n",
			natsAddr, authDir, filepath.Join(authDir, natsauth.FileCA))
		fmt.Fprintf(os.Stderr, "                 bin/switchyard tenancy tenant list   (as admin: admin.creds)\n")
		fmt.Fprintf(os.Stderr, "                 bin/switchyard audit search          (as audit: audit.creds)\n")
		fmt.Fprintf(os.Stderr, "    a worker:    bin/switchyard upstream-worker --nats tls://%s --nats-creds %s --nats-ca %s --config ...\n",
			natsAddr, authDir, filepath.Join(authDir, natsauth.FileCA))
	}
	if adminAddr != "" {
		fmt.Fprintf(os.Stderr, "  metrics and health:       http://%s/metrics, /readyz\n", adminAddr)
		switch {
		case audit && adminCreds:
			fmt.Fprintf(os.Stderr, "  audit search:             http://%s/audit/events  (Authorization: Bearer <audit or admin key>)\n", adminAddr)
		case audit:
			fmt.Fprintf(os.Stderr, "  audit search:             http://%s/audit/events  (refused: set SWITCHYARD_ADMIN_KEY=$(bin/switchyard keygen))\n", adminAddr)
		}
	}
	fmt.Fprintf(os.Stderr, "  try: npx @modelcontextprotocol/inspector  (transport: Streamable HTTP)\n\n")
}
