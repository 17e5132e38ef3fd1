// Package integration holds end-to-end tests of Switchyard: the official
// go-sdk client against real upstreams through every role, in one process
// with embedded NATS and as separate processes over TCP NATS.
package integration
