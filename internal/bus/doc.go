// Package bus holds the NATS plumbing shared by Switchyard's roles: a
// multiplexed reply inbox that understands placement notes and chunked
// replies ([Caller]), chunked responding ([Respond]), and the worker
// presence registry built from heartbeats ([Presence]).
//
// It depends on nats.go and proto only.
package bus
