package proto

// NATS header names. Headers carry routing facts that a hop must read
// without decoding the body.
const (
	// HdrPlaced is set on the note a router sends to the edge's reply subject
	// before it forwards a call: the worker that owns the call. The edge uses
	// it to fail the call at once if that worker goes away, and to send
	// cancellations to it.
	HdrPlaced = "Sy-Placed"
	// HdrChunk marks one part of a chunked reply: "<index>/<count>", 0-based.
	HdrChunk = "Sy-Chunk"
)
