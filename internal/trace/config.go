package trace

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Protocols of the OTLP exporter.
const (
	ProtocolHTTP = "http" // OTLP/HTTP, protobuf encoding (collector port 4318)
	ProtocolGRPC = "grpc" // OTLP/gRPC (collector port 4317)
)

// DefaultServiceName is the service namespace when Config.ServiceName is
// empty: roles report as "switchyard-edge", "switchyard-router", ...
const DefaultServiceName = "switchyard"

// Config configures tracing; it is the `tracing:` section of the config
// file (snake_case YAML keys). The zero value is off.
type Config struct {
	// Enabled turns span recording and OTLP export on. Off (the default),
	// every hop pays nothing: no spans, no headers, no allocations.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the OTLP collector's URL. For "http":
	// http(s)://host:port[/path]; a URL without a path gets the standard
	// /v1/traces. For "grpc": http(s)://host:port (http means plaintext).
	// Required when Enabled.
	Endpoint string `yaml:"endpoint"`
	// Protocol is "http" (the default when empty) or "grpc".
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of root traces (calls whose client sent no
	// trace context) that are sampled, in [0, 1]; 0 (unset) means 1, every
	// call. A trace the client sent is sampled as its traceparent says
	// (parent-based sampling), whatever the ratio.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName is the service namespace; each role reports as
	// "<ServiceName>-<role>" (service.name) within it (service.namespace).
	// Empty means [DefaultServiceName].
	ServiceName string `yaml:"service_name"`
	// Headers are sent with every export (for example a collector's API
	// key). Their values are secrets: [Config.Redacted] hides them, and
	// they belong in the environment (see [ParseHeaders]), not in a file
	// under version control.
	Headers map[string]string `yaml:"headers"`
	// ExportTimeout bounds one export (batch) to the collector; 0 means
	// 10s. Exports run off the hot path, in the batch processor's
	// goroutine.
	ExportTimeout time.Duration `yaml:"-"`
}

// Validate reports every problem of an enabled config, joined; a disabled
// config is always valid (its other fields are not used).
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	switch c.Protocol {
	case "", ProtocolHTTP, ProtocolGRPC:
	default:
		errs = append(errs, fmt.Errorf("trace: protocol %q: want %q or %q", c.Protocol, ProtocolHTTP, ProtocolGRPC))
	}
	if c.Endpoint == "" {
		errs = append(errs, errors.New("trace: endpoint is required when tracing is enabled"))
	} else if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("trace: endpoint %q: want an http:// or https:// URL with a host", c.Endpoint))
	} else if c.Protocol == ProtocolGRPC && u.Path != "" && u.Path != "/" {
		errs = append(errs, fmt.Errorf("trace: endpoint %q: an OTLP/gRPC endpoint has no path", c.Endpoint))
	}
	if c.SampleRatio < 0 || c.SampleRatio > 1 || c.SampleRatio != c.SampleRatio {
		errs = append(errs, fmt.Errorf("trace: sample_ratio %v: want a number in [0, 1]", c.SampleRatio))
	}
	for k := range c.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			errs = append(errs, fmt.Errorf("trace: header name %q is not a valid HTTP header name", k))
		}
	}
	if c.ExportTimeout < 0 {
		errs = append(errs, fmt.Errorf("trace: export timeout %s is negative", c.ExportTimeout))
	}
	return errors.Join(errs...)
}

// Redacted returns a copy of c whose header values are replaced, for
// printing the effective config (-check-config).
func (c Config) Redacted() Config {
	if len(c.Headers) == 0 {
		return c
	}
	h := make(map[string]string, len(c.Headers))
	for k := range c.Headers {
		h[k] = "REDACTED"
	}
	c.Headers = h
	return c
}

// ratio is the effective root sampling ratio.
func (c Config) ratio() float64 {
	if c.SampleRatio == 0 {
		return 1
	}
	return c.SampleRatio
}

func (c Config) serviceName() string {
	if c.ServiceName == "" {
		return DefaultServiceName
	}
	return c.ServiceName
}

// ParseHeaders parses export headers in the OTEL_EXPORTER_OTLP_HEADERS
// format, "key1=value1,key2=value2" (values URL-encoded), which is how a
// role takes them from the environment (SWITCHYARD_TRACING_HEADERS).
// An empty s gives nil.
func ParseHeaders(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			// The pair may hold a secret: say where, not what.
			return nil, fmt.Errorf("trace: headers: entry %d is not key=value", 1+slices.Index(strings.Split(s, ","), pair))
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("trace: headers: value of %q is not URL-encoded", k)
		}
		out[k] = dv
	}
	return out, nil
}
