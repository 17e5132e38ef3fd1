package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
)

const keygenUsage = `usage: switchyard keygen

Prints a new Switchyard API key (syk_..., 256 random bits) on stdout, for
an admin key (admin.keys, SWITCHYARD_ADMIN_KEY, SWITCHYARD_ADMIN_KEY_FILE;
docs/observability.md) or a tenant key to seed (api_keys). Nothing is
stored: keep the key where the configuration reads it, e.g.

  switchyard keygen > admin.key && chmod 600 admin.key
  export SWITCHYARD_ADMIN_KEY=$(switchyard keygen)
`

// runKeygen runs `switchyard keygen args...` and returns the exit code:
// 0 printed, 1 no randomness, 2 usage.
func runKeygen(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, keygenUsage) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "switchyard keygen: unexpected arguments %q\n\n%s", fs.Args(), keygenUsage)
		return 2
	}
	key, _, err := apikey.Generate()
	if err != nil {
		fmt.Fprintln(stderr, "switchyard keygen:", err)
		return 1
	}
	fmt.Fprintln(stdout, key)
	return 0
}
