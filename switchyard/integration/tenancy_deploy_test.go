package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// deployment is Switchyard as separate processes over TCP NATS: `switchyard
// nats`, tenancy-svc, a router, one upstream-worker and one or more edges.
type deployment struct {
	sy      string   // the switchyard binary
	natsURL string   // nats://host:port
	edges   []string // each edge's base URL, http://host:port
}

// startDeployment writes cfg (YAML without listen and nats, which it adds)
// and runs every role as its own process, with edges edges (ids edge-1,
// edge-2, ...). It returns once every edge answers /readyz with 200.
// Children inherit the test's environment (key_env variables included).
func startDeployment(t *testing.T, cfg string, edges int) *deployment {
	t.Helper()
	d := &deployment{sy: bins.Build(t, "switchyard", "github.com/switchyard-mcp/switchyard/switchyard/cmd/switchyard")}
	natsAddr := freeAddr(t)
	d.natsURL = "nats://" + natsAddr
	cfgPath := t.TempDir() + "/switchyard.yaml"
	if err := writeFile(cfgPath, fmt.Sprintf("nats: %s\n%s", d.natsURL, cfg)); err != nil {
		t.Fatal(err)
	}
	startProc(t, "nats", d.sy, "nats", "--addr", natsAddr, "--store", t.TempDir())
	waitTCP(t, natsAddr)
	common := []string{"--config", cfgPath, "--log-format", "text"}
	for _, role := range []string{"tenancy-svc", "router"} {
		startProc(t, role, append([]string{d.sy, role}, common...)...)
	}
	startProc(t, "worker", append([]string{d.sy, "upstream-worker", "--id", "worker-1"}, common...)...)
	for i := range edges {
		addr, id := freeAddr(t), fmt.Sprintf("edge-%d", i+1)
		startProc(t, id, append([]string{d.sy, "edge", "--id", id, "--listen", addr}, common...)...)
		d.edges = append(d.edges, "http://"+addr)
	}
	for _, e := range d.edges {
		eventually(t, 30*time.Second, func() error {
			resp, err := httpClient.Get(e + "/readyz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return errors.New(resp.Status)
			}
			return nil
		})
	}
	return d
}

// cli runs `switchyard tenancy args... --nats <url>` and returns its
// stdout; a nonzero exit fails the test.
func (d *deployment) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), d.sy, append(append([]string{"tenancy"}, args...), "--nats", d.natsURL)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("switchyard tenancy %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.String()
}

// adminRequest sends one request to tenancy-svc's admin service and decodes the
// reply into rep; an error reply fails the test. It returns when the
// reply arrived.
func adminRequest(t *testing.T, nc *nats.Conn, subject string, req, rep any) time.Time {
	t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request(subject, data, 10*time.Second)
	at := time.Now()
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
		var ae tenancy.AdminError
		_ = json.Unmarshal(msg.Data, &ae)
		t.Fatalf("%s: %v", subject, &ae)
	}
	if err := json.Unmarshal(msg.Data, rep); err != nil {
		t.Fatalf("%s: reply %s: %v", subject, msg.Data, err)
	}
	return at
}

// inEffectWithin polls cond every 20 ms from start until it returns nil, and
// returns how long after start it first did; it fails the test if cond
// still fails after limit (polling past the acceptance line, so that a
// slow change is reported with its delay rather than as a timeout).
func inEffectWithin(t *testing.T, start time.Time, limit time.Duration, cond func() error) time.Duration {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("not in effect %s after the admin reply: %v", limit, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-tick.C:
		}
	}
}
