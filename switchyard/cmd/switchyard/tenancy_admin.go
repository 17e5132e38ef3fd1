package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.yaml.in/yaml/v3"

	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
)

const tenancyUsage = `usage: switchyard tenancy <tenant|key|resolve> <verb> [flags]

Administers tenants and API keys through tenancy-svc's admin endpoints
(switchyard.v1.tenancy.admin.*). Whoever may publish there is an admin.
Changes take effect on every edge and router within a second
(docs/tenancy.md, docs/policy.md, docs/limits.md). resolve asks
tenancy-svc's resolve endpoints (switchyard.v1.tenancy.resolve.*) what a
key, a principal or a tenant's policy resolves to.

  tenant put     --name NAME [--file FILE|-] [--anonymous] [--all-upstreams]
                 [--upstream NAME]... [--allow [KIND:]GLOB]... [--deny [KIND:]GLOB]...
                 [--default allow|deny] [--claim NAME=VALUE]... [--group GROUP]...
                 [--rate R] [--burst N] [--principal-rate R] [--principal-burst N]
                 [--max-in-flight N] [--max-sessions N] [--revision N]
  tenant get     NAME            (prints YAML that tenant put --file takes)
  tenant list
  tenant delete  NAME            (deletes its API keys too)
  key create     --tenant NAME --principal P [--expires 720h | --expires-at RFC3339]
                 (prints the key once, on stdout; only its hash is stored)
  key revoke     ID
  key delete     ID              (removes the record, even one that does not decode)
  key list       [--tenant NAME]
  resolve key    [--key-env VAR]
                 (reads the key from stdin, or from $VAR; never from the
                 command line, where ps shows it)
  resolve principal [--issuer ISS] [--claim NAME=VALUE]... [--group GROUP]...
                 (the tenant whose selectors match; at least one claim or group)
  resolve access --tenant NAME --kind KIND --upstream NAME --subject S
                 (what the tenant's policy decides; S is the federated name
                 <upstream>__<name> for tools and prompts, the URI or URI
                 template for resources and resource_templates)

Common flags: --nats URL (env SWITCHYARD_NATS; default nats://127.0.0.1:4222),
--creds FILE (the admin identity's, or the directory of switchyard nats init;
env SWITCHYARD_NATS_CREDS), --nats-ca FILE (env SWITCHYARD_NATS_CA),
--nats-cert/--nats-key FILE, --timeout 10s, --json.
KIND is tools, prompts, resources or resource_templates; rules keep their
order across --allow and --deny (first match wins).
`

// tenancyCLI is one run of `switchyard tenancy`.
type tenancyCLI struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	nats    cliNATS
	timeout time.Duration
	asJSON  bool
}

// runTenancy runs `switchyard tenancy args...` and returns the exit code:
// 0 done, 1 the request failed, 2 usage.
func runTenancy(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &tenancyCLI{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, tenancyUsage)
		return 0
	}
	if len(args) < 2 { // an incomplete command is a usage error
		fmt.Fprint(stderr, tenancyUsage)
		return 2
	}
	noun, verb := args[0], args[1]
	run, ok := map[string]func([]string) (int, error){
		"tenant put":    c.tenantPut,
		"tenant get":    c.tenantGet,
		"tenant list":   c.tenantList,
		"tenant delete": c.tenantDelete,
		"key create":    c.keyCreate,
		"key revoke":    c.keyRevoke,
		"key list":      c.keyList,
		"key delete":    c.keyDelete,

		"resolve key":       c.resolveKey,
		"resolve principal": c.resolvePrincipal,
		"resolve access":    c.resolveAccess,
	}[noun+" "+verb]
	if !ok {
		fmt.Fprintf(stderr, "switchyard tenancy: unknown command %q\n\n%s", noun+" "+verb, tenancyUsage)
		return 2
	}
	code, err := run(args[2:])
	if err != nil {
		fmt.Fprintf(stderr, "switchyard tenancy %s %s: %v\n", noun, verb, err)
	}
	return code
}

// flags returns a flag set with the common flags.
func (c *tenancyCLI) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("switchyard tenancy "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	c.nats.register(fs)
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "how long to wait for tenancy-svc")
	fs.BoolVar(&c.asJSON, "json", false, "print the reply as JSON")
	fs.Usage = func() { fmt.Fprint(c.stderr, tenancyUsage) }
	return fs
}

// errUsage is returned for bad command lines (exit 2); its text is printed.
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

func usagef(format string, a ...any) (int, error) { return 2, errUsage{fmt.Sprintf(format, a...)} }

// parse parses args with flags and positional arguments in any order and
// returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// name takes the one positional argument, or --name.
func oneName(pos []string, flagValue, what string) (string, error) {
	switch {
	case len(pos) > 1:
		return "", errUsage{fmt.Sprintf("one %s expected, got %q", what, pos)}
	case len(pos) == 1 && flagValue != "" && flagValue != pos[0]:
		return "", errUsage{fmt.Sprintf("%s given twice: %q and %q", what, pos[0], flagValue)}
	case len(pos) == 1:
		return pos[0], nil
	case flagValue == "":
		return "", errUsage{what + " required"}
	}
	return flagValue, nil
}

// oneArg parses the arguments of a verb that takes one name, given as its
// one positional argument or as --flag. With n == "" the verb ends with
// code and err (help shown, or a usage error).
func (c *tenancyCLI) oneArg(verb, flag, what string, args []string) (n string, code int, err error) {
	fs := c.flags(verb)
	v := fs.String(flag, "", what)
	pos, err := parse(fs, args)
	if err != nil {
		return "", flagExit(err), nil
	}
	if n, err = oneName(pos, *v, what); err != nil {
		return "", 2, err
	}
	if n == "" { // an empty positional argument
		return "", 2, errUsage{what + " required"}
	}
	return n, 0, nil
}

// call sends req to subj and decodes the reply into out. An error reply
// is returned as a *tenancy.AdminError.
func (c *tenancyCLI) call(subj string, req, out any) error {
	nc, err := c.nats.connect("switchyard-tenancy-admin", c.timeout, proto.IdentityAdmin)
	if err != nil {
		return err
	}
	defer nc.Close()
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, subj, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("no tenancy-svc answers on %s (is it running? may this connection publish there?)", subj)
	case err != nil:
		return fmt.Errorf("request %s: %w", subj, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		e := &tenancy.AdminError{}
		if json.Unmarshal(msg.Data, e) != nil || e.Code == "" {
			e = &tenancy.AdminError{Code: code, Message: msg.Header.Get(micro.ErrorHeader)}
		}
		return e
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("decode reply: %w", err)
	}
	return nil
}

// done prints v as JSON (--json) or with table, and returns exit code 0.
func (c *tenancyCLI) done(v any, table func(w io.Writer)) (int, error) {
	if c.asJSON {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(c.stdout, "%s\n", b)
		return 0, nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	table(tw)
	return 0, tw.Flush()
}

// ruleFlag appends a rule of one effect to a shared, ordered list.
type ruleFlag struct {
	effect policy.Effect
	rules  *[]policy.Rule
}

func (f ruleFlag) String() string { return "" }

func (f ruleFlag) Set(s string) error {
	r, err := parseRule(f.effect, s)
	if err != nil {
		return err
	}
	*f.rules = append(*f.rules, r)
	return nil
}

// parseRule reads "[KIND:]GLOB". A prefix that is not a kind is part of
// the glob, so URIs ("file:///x/*") need no kind.
func parseRule(effect policy.Effect, s string) (policy.Rule, error) {
	r := policy.Rule{Effect: effect, Pattern: s}
	if k, p, ok := strings.Cut(s, ":"); ok {
		switch policy.Kind(k) {
		case policy.KindTools, policy.KindPrompts, policy.KindResources, policy.KindResourceTemplates:
			r.Kind, r.Pattern = policy.Kind(k), p
		}
	}
	if r.Pattern == "" {
		return r, errors.New("empty pattern")
	}
	return r, nil
}

// listFlag collects a repeated string flag.
type listFlag []string

func (f *listFlag) String() string     { return strings.Join(*f, ",") }
func (f *listFlag) Set(s string) error { *f = append(*f, s); return nil }

// tenantFlags are tenant put's flags.
type tenantFlags struct {
	name, file, def                                 string
	anonymous, allUpstreams                         bool
	upstreams, claims, groups                       listFlag
	rules                                           []policy.Rule
	rate, principalRate                             float64
	burst, principalBurst, maxInFlight, maxSessions int
	revision                                        uint64
}

func (tf *tenantFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&tf.name, "name", "", "tenant name (a slug)")
	fs.StringVar(&tf.file, "file", "", "the tenant as YAML or JSON (a tenants: entry); - for stdin; flags add to it")
	fs.BoolVar(&tf.anonymous, "anonymous", false, "requests without credentials get this tenant")
	fs.BoolVar(&tf.allUpstreams, "all-upstreams", false, "the tenant sees every upstream")
	fs.Var(&tf.upstreams, "upstream", "an upstream the tenant sees (repeatable)")
	fs.Var(ruleFlag{policy.Allow, &tf.rules}, "allow", "allow rule [KIND:]GLOB (repeatable, ordered with --deny)")
	fs.Var(ruleFlag{policy.Deny, &tf.rules}, "deny", "deny rule [KIND:]GLOB (repeatable, ordered with --allow)")
	fs.StringVar(&tf.def, "default", "", "decision when no rule matches: allow or deny (default deny)")
	fs.Var(&tf.claims, "claim", "selector NAME=VALUE: principals with that claim value (repeatable)")
	fs.Var(&tf.groups, "group", "selector: principals in that group (repeatable)")
	fs.Float64Var(&tf.rate, "rate", 0, "requests per second for the tenant (0: unlimited)")
	fs.IntVar(&tf.burst, "burst", 0, "burst of the tenant's rate")
	fs.Float64Var(&tf.principalRate, "principal-rate", 0, "requests per second per principal (0: unlimited)")
	fs.IntVar(&tf.principalBurst, "principal-burst", 0, "burst of the per-principal rate")
	fs.IntVar(&tf.maxInFlight, "max-in-flight", 0, "concurrent calls of the tenant (0: unlimited)")
	fs.IntVar(&tf.maxSessions, "max-sessions", 0, "open stateful sessions of the tenant over all edges (0: only each edge's own cap)")
	fs.Uint64Var(&tf.revision, "revision", 0, "store only if the tenant's current revision is this (from tenant get)")
}

// build makes the tenant: the file's (if any), then what the flags set.
func (tf *tenantFlags) build(fs *flag.FlagSet, stdin io.Reader) (tenancy.Tenant, error) {
	var t tenancy.Tenant
	if tf.file != "" {
		var data []byte
		var err error
		if tf.file == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(tf.file)
		}
		if err != nil {
			return t, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&t); err != nil && !errors.Is(err, io.EOF) {
			return t, fmt.Errorf("%s: %w", tf.file, err)
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["name"] {
		t.Name = tf.name
	}
	if set["anonymous"] {
		t.Anonymous = tf.anonymous
	}
	if set["all-upstreams"] {
		t.Policy.AllUpstreams = tf.allUpstreams
	}
	t.Policy.Upstreams = append(t.Policy.Upstreams, tf.upstreams...)
	t.Policy.Rules = append(t.Policy.Rules, tf.rules...)
	if set["default"] {
		t.Policy.Default = policy.Effect(tf.def)
	}
	for _, c := range tf.claims {
		name, value, ok := strings.Cut(c, "=")
		if !ok {
			return t, errUsage{fmt.Sprintf("--claim %q: want NAME=VALUE", c)}
		}
		t.Selectors = append(t.Selectors, tenant.Selector{Claim: name, Value: value})
	}
	for _, g := range tf.groups {
		t.Selectors = append(t.Selectors, tenant.Selector{Group: g})
	}
	l := &t.Limits
	for _, o := range []struct {
		flag string
		set  func()
	}{
		{"rate", func() { l.Rate = tf.rate }},
		{"burst", func() { l.Burst = tf.burst }},
		{"principal-rate", func() { l.PrincipalRate = tf.principalRate }},
		{"principal-burst", func() { l.PrincipalBurst = tf.principalBurst }},
		{"max-in-flight", func() { l.MaxInFlight = tf.maxInFlight }},
		{"max-sessions", func() { l.MaxSessions = tf.maxSessions }},
	} {
		if set[o.flag] {
			o.set()
		}
	}
	if t.Name == "" {
		return t, errUsage{"--name (or name: in --file) required"}
	}
	return t, nil
}

func (c *tenancyCLI) tenantPut(args []string) (int, error) {
	fs := c.flags("tenant put")
	var tf tenantFlags
	tf.register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err), nil
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (use --name)", pos[0])
	}
	t, err := tf.build(fs, c.stdin)
	if err != nil {
		return exitCode(err), err
	}
	// Check here too, for messages before any connection.
	if err := tenancy.CheckTenant(&t); err != nil {
		return 1, fmt.Errorf("invalid tenant: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	var out tenancy.TenantPutReply
	if err := c.call(tenancy.SubjTenantPut, tenancy.TenantPutRequest{Tenant: t, Revision: tf.revision}, &out); err != nil {
		return 1, err
	}
	return c.done(out, func(w io.Writer) {
		what := "updated"
		if out.Created {
			what = "created"
		}
		fmt.Fprintf(w, "tenant %s %s (revision %d)\n", out.Tenant.Name, what, out.Revision)
	})
}

// flagExit is the exit code after a flag parse error, which the flag
// package has reported: 0 for -h, else 2.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func exitCode(err error) int {
	var u errUsage
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

func (c *tenancyCLI) tenantGet(args []string) (int, error) {
	n, code, err := c.oneArg("tenant get", "name", "tenant name", args)
	if n == "" {
		return code, err
	}
	var out tenancy.TenantInfo
	if err := c.call(tenancy.SubjTenantGet, tenancy.TenantGetRequest{Name: n}, &out); err != nil {
		return 1, err
	}
	if c.asJSON {
		return c.done(out, nil)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(out.Tenant); err != nil {
		return 1, err
	}
	fmt.Fprintf(c.stdout, "# tenant %s: revision %d, source %s\n%s", out.Tenant.Name, out.Revision, out.Source, b.Bytes())
	return 0, nil
}

func (c *tenancyCLI) tenantList(args []string) (int, error) {
	fs := c.flags("tenant list")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err), nil
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	var out tenancy.TenantListReply
	if err := c.call(tenancy.SubjTenantList, tenancy.TenantListRequest{}, &out); err != nil {
		return 1, err
	}
	return c.done(out, func(w io.Writer) {
		fmt.Fprintln(w, "NAME\tSOURCE\tREVISION\tANONYMOUS\tUPSTREAMS\tRULES\tDEFAULT\tSELECTORS")
		for _, ti := range out.Tenants {
			t := ti.Tenant
			ups := strings.Join(t.Policy.Upstreams, ",")
			if t.Policy.AllUpstreams {
				ups = "*"
			}
			def := string(t.Policy.Default)
			if def == "" {
				def = string(policy.Deny)
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%t\t%s\t%d\t%s\t%d\n", t.Name, ti.Source, ti.Revision, t.Anonymous, dash(ups), len(t.Policy.Rules), def, len(t.Selectors))
		}
	})
}

func (c *tenancyCLI) tenantDelete(args []string) (int, error) {
	n, code, err := c.oneArg("tenant delete", "name", "tenant name", args)
	if n == "" {
		return code, err
	}
	var out tenancy.TenantDeleteReply
	if err := c.call(tenancy.SubjTenantDelete, tenancy.TenantDeleteRequest{Name: n}, &out); err != nil {
		return 1, err
	}
	return c.done(out, func(w io.Writer) {
		fmt.Fprintf(w, "tenant %s deleted with %d API keys\n", out.Name, out.KeysDeleted)
	})
}

func (c *tenancyCLI) keyCreate(args []string) (int, error) {
	fs := c.flags("key create")
	tenantName := fs.String("tenant", "", "the key's tenant (required)")
	principal := fs.String("principal", "", "the principal the key authenticates as (required)")
	expires := fs.Duration("expires", 0, "the key expires this long from now (e.g. 720h); default never")
	expiresAt := fs.String("expires-at", "", "the key expires at this RFC 3339 time; default never")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err), nil
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case *tenantName == "" || *principal == "":
		return usagef("--tenant and --principal are required")
	case *expires != 0 && *expiresAt != "":
		return usagef("--expires and --expires-at: give one")
	case *expires < 0:
		return usagef("--expires must be positive")
	}
	req := tenancy.KeyCreateRequest{Tenant: *tenantName, Principal: *principal}
	if *expires > 0 {
		req.ExpiresUnixMs = time.Now().Add(*expires).UnixMilli()
	}
	if *expiresAt != "" {
		at, err := time.Parse(time.RFC3339, *expiresAt)
		if err != nil {
			return usagef("--expires-at: %v", err)
		}
		req.ExpiresUnixMs = at.UnixMilli()
	}
	var out tenancy.KeyCreateReply
	if err := c.call(tenancy.SubjKeyCreate, req, &out); err != nil {
		return 1, err
	}
	if c.asJSON {
		return c.done(out, nil)
	}
	// The key alone on stdout, for KEY=$(switchyard tenancy key create ...).
	fmt.Fprintln(c.stdout, out.Key)
	fmt.Fprintf(c.stderr, "API key %s for %s/%s, expires %s. This is the only time the key is shown: store it now.\n",
		out.ID, out.Tenant, out.Principal, when(out.ExpiresUnixMs, "never"))
	return 0, nil
}

func (c *tenancyCLI) keyRevoke(args []string) (int, error) {
	n, code, err := c.oneArg("key revoke", "id", "key id", args)
	if n == "" {
		return code, err
	}
	var out tenancy.KeyInfo
	if err := c.call(tenancy.SubjKeyRevoke, tenancy.KeyRevokeRequest{ID: n}, &out); err != nil {
		return 1, err
	}
	return c.done(out, func(w io.Writer) {
		fmt.Fprintf(w, "API key %s (%s/%s) revoked\n", out.ID, out.Tenant, out.Principal)
	})
}

func (c *tenancyCLI) keyDelete(args []string) (int, error) {
	n, code, err := c.oneArg("key delete", "id", "key id", args)
	if n == "" {
		return code, err
	}
	var out tenancy.KeyInfo
	if err := c.call(tenancy.SubjKeyDelete, tenancy.KeyDeleteRequest{ID: n}, &out); err != nil {
		return 1, err
	}
	return c.done(out, func(w io.Writer) {
		if out.Undecodable {
			fmt.Fprintf(w, "API key %s (a record that did not decode) deleted\n", out.ID)
			return
		}
		fmt.Fprintf(w, "API key %s (%s/%s) deleted\n", out.ID, out.Tenant, out.Principal)
	})
}

func (c *tenancyCLI) keyList(args []string) (int, error) {
	fs := c.flags("key list")
	tenantName := fs.String("tenant", "", "only this tenant's keys")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err), nil
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	var out tenancy.KeyListReply
	if err := c.call(tenancy.SubjKeyList, tenancy.KeyListRequest{Tenant: *tenantName}, &out); err != nil {
		return 1, err
	}
	return c.done(out, func(w io.Writer) {
		fmt.Fprintln(w, "ID\tTENANT\tPRINCIPAL\tCREATED\tEXPIRES\tREVOKED\tSOURCE")
		for _, k := range out.Keys {
			if k.Undecodable { // nothing but its id is known: key delete removes it
				fmt.Fprintf(w, "%s\t(undecodable)\t-\t-\t-\t-\t%s\n", k.ID, k.Source)
				continue
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%t\t%s\n", k.ID, k.Tenant, k.Principal,
				when(k.CreatedUnixMs, "-"), when(k.ExpiresUnixMs, "never"), k.Revoked, k.Source)
		}
	})
}

// when formats Unix milliseconds as UTC RFC 3339, or zero as none.
func when(ms int64, none string) string {
	if ms == 0 {
		return none
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// maxKeyInput bounds what resolve key reads from stdin (bytes); a key is
// under 100.
const maxKeyInput = 4096

// readKey reads one API key from the environment variable env, or from
// stdin when env is empty. Its errors never quote the input.
func (c *tenancyCLI) readKey(env string) (string, error) {
	var key string
	if env != "" {
		key = os.Getenv(env)
		if key == "" {
			return "", errUsage{fmt.Sprintf("--key-env %s: the variable is unset or empty", env)}
		}
	} else {
		if f, ok := c.stdin.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprintln(c.stderr, "reading the API key from stdin (end with Ctrl-D); pipe it in to keep it off the screen")
			}
		}
		b, err := io.ReadAll(io.LimitReader(c.stdin, maxKeyInput+1))
		if err != nil {
			return "", fmt.Errorf("read stdin: %w", err)
		}
		if len(b) > maxKeyInput {
			return "", errUsage{fmt.Sprintf("stdin holds more than %d bytes: not one API key", maxKeyInput)}
		}
		key = string(b)
	}
	key = strings.TrimSpace(key)
	switch {
	case key == "":
		return "", errUsage{"no API key on stdin (or use --key-env VAR)"}
	case strings.ContainsFunc(key, unicode.IsSpace):
		return "", errUsage{"the input holds more than one word: give exactly one API key"}
	}
	return key, nil
}

func (c *tenancyCLI) resolveKey(args []string) (int, error) {
	fs := c.flags("resolve key")
	keyEnv := fs.String("key-env", "", "read the key from this environment variable (default: stdin)")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err), nil
	}
	if len(pos) > 0 { // not quoted: it may be the key
		return usagef("the key is read from stdin or --key-env VAR, never from the command line (ps shows it to every user)")
	}
	key, err := c.readKey(*keyEnv)
	if err != nil {
		return exitCode(err), err
	}
	var out tenancy.ResolveKeyReply
	if err := c.call(tenancy.SubjResolveKey, tenancy.ResolveKeyRequest{Key: key}, &out); err != nil {
		return 1, err
	}
	return c.done(out, func(w io.Writer) {
		fmt.Fprintf(w, "API key %s: tenant %s, principal %s\n", out.KeyID, out.Tenant, out.Principal)
	})
}

func (c *tenancyCLI) resolvePrincipal(args []string) (int, error) {
	fs := c.flags("resolve principal")
	issuer := fs.String("issuer", "", "the issuer that vouched for the principal (a JWT's iss)")
	var claims, groups listFlag
	fs.Var(&claims, "claim", "a claim value NAME=VALUE (repeatable; repeat a name for several values)")
	fs.Var(&groups, "group", "a group the principal is in (repeatable)")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err), nil
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	req := tenancy.ResolvePrincipalRequest{Issuer: *issuer, Groups: groups}
	for _, cl := range claims {
		name, value, ok := strings.Cut(cl, "=")
		if !ok || name == "" {
			return usagef("--claim %q: want NAME=VALUE", cl)
		}
		if req.Claims == nil {
			req.Claims = map[string][]string{}
		}
		req.Claims[name] = append(req.Claims[name], value)
	}
	if len(claims) == 0 && len(groups) == 0 {
		return usagef("give at least one --claim or --group")
	}
	var out tenancy.ResolvePrincipalReply
	if err := c.call(tenancy.SubjResolvePrincipal, req, &out); err != nil {
		return 1, err
	}
	return c.done(out, func(w io.Writer) {
		fmt.Fprintf(w, "tenant %s\n", out.Tenant)
	})
}

func (c *tenancyCLI) resolveAccess(args []string) (int, error) {
	fs := c.flags("resolve access")
	var req tenancy.ResolveAccessRequest
	fs.StringVar(&req.Tenant, "tenant", "", "the tenant whose policy decides (required)")
	fs.StringVar(&req.Kind, "kind", "", "tools, prompts, resources or resource_templates (required)")
	fs.StringVar(&req.Upstream, "upstream", "", "the upstream serving the item (required)")
	fs.StringVar(&req.Subject, "subject", "", "the federated name (tools, prompts), URI or URI template (required)")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err), nil
	}
	switch policy.Kind(req.Kind) {
	case policy.KindTools, policy.KindPrompts, policy.KindResources, policy.KindResourceTemplates:
	default:
		if req.Kind != "" {
			return usagef("--kind %q: want tools, prompts, resources or resource_templates", req.Kind)
		}
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case req.Tenant == "" || req.Kind == "" || req.Upstream == "" || req.Subject == "":
		return usagef("--tenant, --kind, --upstream and --subject are required")
	}
	var out tenancy.ResolveAccessReply
	if err := c.call(tenancy.SubjResolveAccess, req, &out); err != nil {
		return 1, err
	}
	return c.done(out, func(w io.Writer) {
		switch {
		case out.Allowed:
			fmt.Fprintf(w, "allowed: tenant %s sees %s %q of upstream %s\n", req.Tenant, req.Kind, req.Subject, req.Upstream)
		case out.UpstreamVisible:
			fmt.Fprintf(w, "denied: tenant %s sees upstream %s, but its rules (or default) deny %s %q\n", req.Tenant, req.Upstream, req.Kind, req.Subject)
		default:
			fmt.Fprintf(w, "denied: tenant %s does not see upstream %s\n", req.Tenant, req.Upstream)
		}
	})
}
