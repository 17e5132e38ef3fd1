package proto

// NATS header names. Headers carry routing facts that a hop must read
// without decoding the body.
const (
	// HdrPlaced is set on the note a router sends to the edge's reply subject
	// before it forwards a call: the worker that owns the call. The edge uses
	// it to fail the call at once if that worker goes away, and to send
	// cancellations to it.
	HdrPlaced = "Sy-Placed"
	// HdrReplyTo is set by the router on a forwarded call: the edge's reply
	// subject, where the worker answers. The message's own reply subject is
	// the router's, so that NATS's no-responders status for a worker that is
	// gone comes back to the router, which tells the edge the call was not
	// delivered.
	HdrReplyTo = "Sy-Reply-To"
	// HdrChunk marks one part of a chunked reply: "<index>/<count>", 0-based.
	HdrChunk = "Sy-Chunk"
)
