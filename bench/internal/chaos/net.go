package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Net is a set of network namespaces standing in for hosts, each joined
// to a bridge in the driver's namespace by a veth pair. The driver
// reaches every host at its address, and the hosts reach each other and
// the bridge's own address. Creating one needs root (CAP_NET_ADMIN) and
// the ip command. Methods are not safe for concurrent use.
type Net struct {
	prefix string // names of everything created: <prefix>-<host>, <prefix>br
	// BridgeIP is the driver's address on the bridge, for servers the
	// hosts reach in the driver's namespace (the upstream).
	BridgeIP string
	hosts    map[string]string // host -> address
	netns    []string          // namespaces created, to remove
	bridge   bool
}

// run runs the ip command with args, with its output in the error.
func run(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NewNet creates a namespace per host on a fresh bridge and a /24 of
// 10.231.0.0/16 picked at random; on error it removes what it created.
func NewNet(ctx context.Context, hosts []string) (_ *Net, err error) {
	var rb [3]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, err
	}
	n := &Net{prefix: "sy" + hex.EncodeToString(rb[:2]), hosts: map[string]string{}}
	subnet := fmt.Sprintf("10.231.%d", rb[2])
	n.BridgeIP = subnet + ".1"
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	br := n.prefix + "br"
	if err := run(ctx, "link", "add", br, "type", "bridge"); err != nil {
		return nil, err
	}
	n.bridge = true
	for _, args := range [][]string{{"addr", "add", n.BridgeIP + "/24", "dev", br}, {"link", "set", br, "up"}} {
		if err := run(ctx, args...); err != nil {
			return nil, err
		}
	}
	for i, h := range hosts {
		ns, veth, ip := n.NS(h), n.veth(h), fmt.Sprintf("%s.%d", subnet, 11+i)
		if err := run(ctx, "netns", "add", ns); err != nil {
			return nil, err
		}
		n.netns = append(n.netns, ns)
		for _, args := range [][]string{
			{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"link", "set", veth, "master", br, "up"},
			{"-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		} {
			if err := run(ctx, args...); err != nil {
				return nil, err
			}
		}
		n.hosts[h] = ip
	}
	return n, nil
}

// NS is host's namespace name.
func (n *Net) NS(host string) string { return n.prefix + "-" + host }

func (n *Net) veth(host string) string { return n.prefix + host }

// IP is host's address.
func (n *Net) IP(host string) string { return n.hosts[host] }

// Command returns a command running name with args in host's namespace.
func (n *Net) Command(host, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.NS(host), name}, args...)...)
}

// Cut takes host off the network (its link to the bridge goes down): no
// packet reaches it or leaves it until Heal. Its own processes still
// reach each other over its loopback.
func (n *Net) Cut(ctx context.Context, host string) error {
	return run(ctx, "link", "set", n.veth(host), "down")
}

// Heal puts host back on the network.
func (n *Net) Heal(ctx context.Context, host string) error {
	return run(ctx, "link", "set", n.veth(host), "up")
}

// Close removes the namespaces (and with them the veth pairs) and the
// bridge. It is safe to call more than once.
func (n *Net) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var first error
	for _, ns := range n.netns {
		if err := run(ctx, "netns", "del", ns); err != nil && first == nil {
			first = err
		}
	}
	n.netns = nil
	if n.bridge {
		if err := run(ctx, "link", "del", n.prefix+"br"); err != nil && first == nil {
			first = err
		}
		n.bridge = false
	}
	return first
}
