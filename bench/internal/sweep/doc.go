// Package sweep implements the concurrency sweep: for each connection count
// it measures an endpoint directly, then through Switchyard (never both at
// once), with every connection a full go-sdk client session making
// sequential requests for a fixed time, and reports throughput, latency
// percentiles, errors, the gateway's throughput retention and, when the
// driver knows their process ids, the CPU the gateway and the upstreams
// spent per request. With rounds, each pair of stages is measured in
// alternating slices over sessions kept open, and retention is the median
// of the per-round ratios, so that drifting host load weighs on both
// sides alike.
//
// A federation sweep measures tools/list through a gateway in front of
// several upstreams (shapes "UxT": U upstreams with T extra tools each),
// with one upstream listed directly as the reference.
//
// The load loop does no allocation of its own per request: latencies go into
// a slice preallocated per connection and progress is two atomic counters.
package sweep
