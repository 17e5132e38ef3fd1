package metrics

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every Switchyard metric name.
const Namespace = "switchyard"

// NewRegistry returns the registry a process serves on its admin
// listener: the Go runtime and process collectors and
// switchyard_build_info. Roles and libraries (audit, tracing) register
// their own metrics into it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	RegisterBuildInfo(reg)
	return reg
}

// Or returns reg, or a new private registry when reg is nil: a role built
// without a registry still records (the cost on its hot path is the same)
// but nothing serves it.
func Or(reg prometheus.Registerer) prometheus.Registerer {
	if reg == nil {
		return prometheus.NewRegistry()
	}
	return reg
}

// RegisterBuildInfo registers switchyard_build_info{version,revision,
// goversion}, always 1: join it to other series to see which build
// produced them.
func RegisterBuildInfo(reg prometheus.Registerer) {
	version, revision := build()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   Namespace,
		Name:        "build_info",
		Help:        "Always 1; the labels name the build: version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	})
	g.Set(1)
	reg.MustRegister(g)
}

// Version is the build's version as semver (the micro services' version):
// the main module's version when it is semver, else 0.0.0-devel with the
// VCS revision as build metadata when known.
func Version() string {
	v, rev := build()
	if v != "(devel)" && v != "" {
		return v
	}
	if rev != "unknown" {
		return "0.0.0-devel+" + rev[:min(12, len(rev))]
	}
	return "0.0.0-devel"
}

// build returns the main module's version ("(devel)" when unversioned)
// and VCS revision ("unknown" when not stamped).
func build() (version, revision string) {
	version, revision = "(devel)", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, revision
	}
	if v := strings.TrimPrefix(bi.Main.Version, "v"); v != "" && v != "(devel)" {
		version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			revision = s.Value
		}
	}
	return version, revision
}

// RegisterNATS registers the connection metrics of one role's NATS
// connection, read from nc at scrape time (nothing on the hot path):
// switchyard_nats_reconnects_total{role} and switchyard_nats_connected{role}.
// It fails if the role's metrics are already registered in reg.
func RegisterNATS(reg prometheus.Registerer, role string, nc *nats.Conn) error {
	l := prometheus.Labels{"role": role}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: "nats_reconnects_total", ConstLabels: l,
			Help: "Times the role's NATS connection reconnected to a server.",
		}, func() float64 { return float64(nc.Stats().Reconnects) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "nats_connected", ConstLabels: l,
			Help: "1 while the role's NATS connection is connected, else 0.",
		}, func() float64 {
			if nc.IsConnected() {
				return 1
			}
			return 0
		}),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
