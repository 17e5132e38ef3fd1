// Command bench holds Switchyard's benchmark tooling.
//
// Usage:
//
//	bench fixture [flags]   serve the fixture upstream MCP server
//	bench latency [flags]   the latency gate: tools/call direct vs through the gateway
//	bench proxy [flags]     a minimal reverse proxy to one upstream (the latency floor)
//	bench sweep [flags]     concurrency and federation sweep, with tables and plots
//	bench scale [flags]     horizontal scaling: throughput vs upstream-workers in cluster mode
//	bench bus [flags]       the floor of the NATS round trip a call makes, embedded or over TCP
//	bench sessions [flags]  the edge's memory per idle session (multi-process)
//	bench lb -backends A,B  a round-robin load balancer over edges (no session affinity)
//	bench chaos [flags]     the fault harness: roles killed and NATS cut under load (root)
//	bench probe -url URL    exit 0 if an HTTP or NATS server answers at URL (container health checks)
//
// Run "bench <command> -h" for a command's flags.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: bench <command> [flags]

commands:
  fixture   serve the fixture upstream MCP server (stdio or streamable HTTP)
  latency   the latency gate: added p50 of tools/call through the gateway
  proxy     a minimal HTTP reverse proxy to one upstream MCP endpoint (latency -proxy)
  sweep     throughput and latency vs connections, direct and through the gateway
  scale     throughput vs upstream-workers (1, 2, 4) of a multi-process gateway
  bus       sequential NATS request-replies to an echo responder, in-process or over TCP (the bus floor)
  sessions  the edge's resident memory holding 0 to -n idle sessions, multi-process
  lb        a round-robin HTTP load balancer over -backends (each request to the next)
  chaos     fault scenarios under load on a namespaced deployment (needs root; docs/reliability.md)
  probe     exit 0 if an HTTP (status < 500) or NATS server answers at -url (health checks)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "fixture":
		os.Exit(runFixture(args))
	case "latency":
		os.Exit(runLatency(args))
	case "proxy":
		os.Exit(runProxy(args))
	case "sweep":
		os.Exit(runSweep(args))
	case "scale":
		os.Exit(runScale(args))
	case "bus":
		os.Exit(runBus(args))
	case "chaos":
		os.Exit(runChaos(args))
	case "lb":
		os.Exit(runLB(args))
	case "sessions":
		os.Exit(runSessions(args))
	case "probe":
		os.Exit(runProbe(args))
	case "-h", "-help", "--help", "help":
		fmt.Fprint(os.Stderr, usage)
	default:
		fmt.Fprintf(os.Stderr, "bench: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
}
