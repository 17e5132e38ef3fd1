// Command switchyard runs Switchyard: every role in one process with an
// embedded NATS server (dev), a standalone NATS server (nats), one role
// (edge, router, upstream-worker, tenancy-svc), any set of roles against a
// NATS server (run), an HTTP health probe (probe), a stdio front for a
// remote gateway (stdio); it also administers tenants and API keys
// (tenancy), searches the audit trail (audit) and mints keys (keygen).
package main

import (
	"fmt"
	"os"
)

const usage = `usage: switchyard <command> [flags]

commands:
  dev              all roles and an embedded NATS server in one process
  nats             a standalone NATS server with JetStream (--auth DIR: authenticated, TLS)
  nats init DIR    generate the deployment's NATS identities, CA and certificate
  nats rotate DIR ID|all
                   replace an identity's credentials and revoke the old ones
  nats provision   create (or --update) every bucket and stream (admin identity)
  nats cert DIR    a new server certificate from DIR's CA (renew, add --host names)
  run              a set of roles (--roles edge,router,...) against a NATS server
  edge | router | upstream-worker | tenancy-svc
                   one role against a NATS server
  probe URL        exit 0 if URL answers 2xx (container health checks)
  stdio --url URL  bridge MCP over stdin/stdout to a gateway (desktop clients)
  tenancy <tenant|key|resolve> <verb>
                   administer tenants and API keys, resolve keys, principals
                   and access (tenancy-svc's admin and resolve endpoints)
  audit search     search the audit trail (tenant, principal, upstream,
                   tool, outcome, time range), newest first
  keygen           print a new API key (syk_...) for admin.keys or api_keys

Run 'switchyard <command> -h' for its flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "dev":
		os.Exit(runDev(args))
	case "nats":
		os.Exit(runNATS(args))
	case "run":
		os.Exit(runRoles(args))
	case "probe":
		os.Exit(runProbe(args))
	case "stdio":
		os.Exit(runStdio(args))
	case "tenancy":
		os.Exit(runTenancy(args, os.Stdin, os.Stdout, os.Stderr))
	case "audit":
		os.Exit(runAudit(args, os.Stdout, os.Stderr))
	case "keygen":
		os.Exit(runKeygen(args, os.Stdout, os.Stderr))
	case "edge", "router", "upstream-worker", "tenancy-svc":
		os.Exit(runRoles(append([]string{"--roles", cmd}, args...)))
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "switchyard: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
}
