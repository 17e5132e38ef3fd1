// Command bench holds Switchyard's benchmark tooling.
//
// Usage:
//
//	bench fixture [flags]   serve the fixture upstream MCP server
//
// Run "bench fixture -h" for the fixture's flags.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: bench <command> [flags]

commands:
  fixture   serve the fixture upstream MCP server (stdio or streamable HTTP)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "fixture":
		os.Exit(runFixture(args))
	case "-h", "-help", "--help", "help":
		fmt.Fprint(os.Stderr, usage)
	default:
		fmt.Fprintf(os.Stderr, "bench: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
}
