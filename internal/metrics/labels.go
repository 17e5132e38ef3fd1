package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Methods are the method label's values, in index order: the MCP
// requests the gateway serves or forwards. Any other method (including
// one a client made up) is recorded as "other", so the label stays
// bounded whatever clients send.
var Methods = []string{
	"other",
	"initialize",
	"ping",
	"server/discover",
	"tools/list",
	"tools/call",
	"prompts/list",
	"prompts/get",
	"resources/list",
	"resources/templates/list",
	"resources/read",
	"resources/subscribe",
	"resources/unsubscribe",
	"completion/complete",
	"logging/setLevel",
	"subscriptions/listen",
	"tasks/get",
	"tasks/update",
	"tasks/cancel",
	"tasks/list",
	"tasks/result",
}

var methodIndex = func() map[string]int {
	m := make(map[string]int, len(Methods))
	for i, n := range Methods {
		m[n] = i
	}
	return m
}()

// MethodLabel returns the method label of an MCP method: the method
// itself when it is in [Methods], else "other".
func MethodLabel(method string) string { return Methods[methodIndex[method]] }

// Outcome label values. OutcomeOK is a request answered with a result
// (a tool result with isError set is a result: the upstream's tool
// failed, the request did not); every other value is the class of the
// JSON-RPC error code the request was answered with.
const (
	OutcomeOK = "ok"
	// OutcomeOther is any code not in the table below: an upstream's own
	// error code.
	OutcomeOther = "upstream_error"
)

// outcomes maps JSON-RPC codes to their outcome label; index 0 is
// OutcomeOK and index 1 OutcomeOther.
var outcomes = []struct {
	code  int64
	label string
}{
	{0, OutcomeOK},
	{0, OutcomeOther},
	{-32700, "parse_error"},
	{-32600, "invalid_request"},
	{-32601, "method_not_found"},
	{-32602, "invalid_params"},
	{-32603, "internal"},
	{-32800, "cancelled"},
	{-32002, "resource_not_found"},
	{-32020, "header_mismatch"},
	{-32060, "no_workers"},
	{-32061, "upstream_unavailable"},
	{-32062, "timeout"},
	{-32063, "overloaded"},
	{-32064, "worker_lost"},
	{-32065, "payload_too_large"},
	{-32066, "bad_envelope"},
	{-32067, "unavailable"},
	{-32068, "not_delivered"},
	{-32069, "limited"},
}

// Outcomes are the outcome label's values, in index order.
var Outcomes = func() []string {
	out := make([]string, len(outcomes))
	for i, o := range outcomes {
		out[i] = o.label
	}
	return out
}()

// outcomeIndex returns the index in Outcomes of a request answered with
// JSON-RPC error code (0: a result).
func outcomeIndex(code int64) int {
	if code == 0 {
		return 0
	}
	for i := 2; i < len(outcomes); i++ {
		if outcomes[i].code == code {
			return i
		}
	}
	return 1
}

// Outcome returns the outcome label of a request answered with JSON-RPC
// error code (0: a result, "ok").
func Outcome(code int64) string { return outcomes[outcomeIndex(code)].label }

// DurationBuckets are the upper bounds (seconds) of every request
// duration histogram: from 100 µs (a list answered from the router's
// cache) to a minute (the default call timeout).
var DurationBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// BusBuckets are the upper bounds (seconds) of the bus-time histogram:
// a hop over a local NATS server takes tens of microseconds, a loaded or
// remote one milliseconds.
var BusBuckets = []float64{
	0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
}

// MethodOutcome is a histogram with (at least) the labels method and
// outcome, whose children are bound on first use and cached: Observe
// allocates nothing after a pair's first observation. Safe for
// concurrent use.
type MethodOutcome struct {
	vec   prometheus.ObserverVec
	cells []atomic.Pointer[cell] // len(Methods) * len(outcomes)
}

type cell struct{ o prometheus.Observer }

// NewMethodOutcome wraps vec, whose remaining labels must be exactly
// method and outcome (in that order).
func NewMethodOutcome(vec prometheus.ObserverVec) *MethodOutcome {
	return &MethodOutcome{vec: vec, cells: make([]atomic.Pointer[cell], len(Methods)*len(outcomes))}
}

// Observe records d for method (labelled by [MethodLabel]) answered with
// JSON-RPC error code (0: a result).
func (h *MethodOutcome) Observe(method string, code int64, d time.Duration) {
	h.child(methodIndex[method], outcomeIndex(code)).Observe(d.Seconds())
}

func (h *MethodOutcome) child(m, o int) prometheus.Observer {
	c := &h.cells[m*len(outcomes)+o]
	if p := c.Load(); p != nil {
		return p.o
	}
	p := &cell{o: h.vec.WithLabelValues(Methods[m], outcomes[o].label)}
	c.Store(p) // a racing first use binds the same child
	return p.o
}
