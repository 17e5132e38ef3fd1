package embedded

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestClusterOfThree: three nodes form a cluster over authenticated
// routes, a bucket with three replicas takes writes, and keeps them and
// takes more once a node is gone; a route without the secret is refused.
func TestClusterOfThree(t *testing.T) {
	clients, routes := make([]string, 3), make([]string, 3)
	for i := range 3 {
		clients[i], routes[i] = freePort(t), freePort(t)
	}
	start := func(i int, secret string) (*Options, error) {
		o := Options{Addr: clients[i], StoreDir: t.TempDir(), Name: fmt.Sprintf("n%d", i),
			Cluster: &Cluster{Name: "sy-test", Listen: routes[i], Routes: routes, Secret: secret}}
		return &o, nil
	}
	var nodes [3]*Options
	srvs := make([]interface{ Shutdown() }, 3)
	for i := range 3 {
		o, _ := start(i, "s3cret")
		nodes[i] = o
		s, err := Start(*o)
		if err != nil {
			t.Fatal(err)
		}
		srvs[i] = s
		t.Cleanup(s.Shutdown)
	}
	nc, err := nats.Connect(strings.Join([]string{"nats://" + clients[0], "nats://" + clients[1], "nats://" + clients[2]}, ","),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var kv jetstream.KeyValue
	for { // the meta leader takes a moment to be elected
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		kv, err = js.CreateKeyValue(actx, jetstream.KeyValueConfig{Bucket: "b", Replicas: 3})
		acancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create an R3 bucket: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	srvs[0].Shutdown() // a minority goes
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = kv.Put(pctx, "k", []byte("v2"))
		pcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("write with a node gone: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "v2" {
		t.Fatalf("read with a node gone: %v %v", e, err)
	}

	// A node with the wrong secret does not join.
	o, _ := start(0, "wrong")
	o.StoreDir = t.TempDir()
	intruder, err := Start(*o)
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Shutdown()
	time.Sleep(2 * time.Second)
	if n := intruder.NumRoutes(); n != 0 {
		t.Fatalf("a node with the wrong route secret has %d routes", n)
	}
}
