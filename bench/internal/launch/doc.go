// Package launch starts the processes the benchmark driver measures when it
// runs in "embedded" mode: fixture upstreams (the bench binary's own
// "fixture" subcommand) and a Switchyard gateway ("switchyard dev" with a
// generated configuration), waits until they serve, and stops them.
//
// Children get SIGTERM when the driver dies (Linux parent-death signal), so
// an interrupted CI job leaves no servers behind.
package launch
