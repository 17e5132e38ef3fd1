package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// helperEnv makes the test binary, started as a child by a test, act as
// "bench" (this package's main) or, for a first argument "nats", as
// "switchyard nats".
const helperEnv = "BENCH_CMD_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		if len(os.Args) > 1 && os.Args[1] == "nats" {
			os.Exit(helperNATS(os.Args[2:]))
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperNATS serves what "switchyard nats --addr A --store S" serves (a
// NATS server with JetStream on A) until SIGTERM.
func helperNATS(args []string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fs := flag.NewFlagSet("nats", flag.ContinueOnError)
	addr := fs.String("addr", "", "")
	store := fs.String("store", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper nats:", err)
		return 2
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper nats:", err)
		return 2
	}
	ns, err := server.NewServer(&server.Options{Host: host, Port: p, JetStream: true, StoreDir: *store, NoLog: true, NoSigs: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper nats:", err)
		return 1
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(os.Stderr, "helper nats: not ready")
		return 1
	}
	<-term
	ns.Shutdown()
	ns.WaitForShutdown()
	return 0
}
