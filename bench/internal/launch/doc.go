// Package launch starts the processes the benchmark driver measures: fixture
// upstreams (the bench binary's own "fixture" subcommand) and a Switchyard
// gateway in front of them, either "switchyard dev" with a generated
// configuration (embedded mode) or a cluster of one process per role
// instance ("switchyard nats", "tenancy-svc", "router", "upstream-worker",
// "edge"; cluster mode), and optionally a minimal reverse proxy (the bench
// binary's "proxy" subcommand, [StartProxy]) in front of a fixture; it
// waits until they serve, and stops them.
//
// Children get SIGTERM when the driver dies (Linux parent-death signal), so
// an interrupted CI job leaves no servers behind.
package launch
