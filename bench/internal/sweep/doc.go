// Package sweep implements the concurrency sweep: for each connection count
// it measures an endpoint directly, then through Switchyard (never both at
// once), with every connection a full go-sdk client session making
// sequential requests for a fixed time, and reports throughput, latency
// percentiles, errors, the gateway's throughput retention and, when the
// driver knows their process ids, the CPU the gateway and the upstreams
// spent per request. With rounds, the stages of a connection count are
// measured in alternating slices over sessions kept open, and retention is
// the median of the per-round ratios, so that drifting host load weighs on
// every side alike.
//
// An optional third side, proxy, measures the direct upstream through a
// bare reverse proxy process ("bench proxy"), between the direct and the
// gateway stage: what a minimal proxy process keeps of direct throughput
// and the CPU it spends per request, the floor any gateway pays on the
// machine. Its retention is against direct too; its CPU is reported as
// [StageResult.ProxyCPUPerCall].
//
// A federation sweep measures tools/list through a gateway in front of
// several upstreams (shapes "UxT": U upstreams with T extra tools each),
// with one upstream listed directly as the reference.
//
// The load loop does no allocation of its own per request: latencies go into
// a slice preallocated per connection and progress is two atomic counters.
package sweep
