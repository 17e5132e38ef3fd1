package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// TestIntegrationUpstreamMessages checks that the go-sdk everything-server's
// logging, progress, sampling and elicitation reach an official-SDK client
// through the gateway (the upstream over HTTP and over stdio, a 2025-11-25
// client), and that an elicitation of the 2025-era HTTP upstream reaches a
// 2026-07-28 client as an input_required round trip.
func TestIntegrationUpstreamMessages(t *testing.T) {
	_, g := startEverythingGateway(t)
	for _, u := range []string{"ev-http", "ev-stdio"} {
		t.Run(u, func(t *testing.T) {
			var mu sync.Mutex
			var logs, progress, asked []string
			opts := &mcp.ClientOptions{
				LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
					mu.Lock()
					logs = append(logs, fmt.Sprint(r.Params.Data))
					mu.Unlock()
				},
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, fmt.Sprint(r.Params.Progress))
					mu.Unlock()
				},
				CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					mu.Lock()
					asked = append(asked, "sampling")
					mu.Unlock()
					return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled answer"}}, nil
				},
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, "elicitation")
					mu.Unlock()
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
				},
			}
			var cs *mcp.ClientSession
			eventually(t, 20*time.Second, func() error { // the upstream is catalogued
				cs = connect(t, g.url+"/mcp/"+u, v2025, opts)
				_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "test_simple_text"})
				return err
			})
			if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatal(err)
			}
			call := func(name string, meta mcp.Meta) string {
				t.Helper()
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: toolArgs[name], Meta: meta})
				if err != nil || res.IsError {
					t.Fatalf("%s: %v %q", name, err, text(res))
				}
				return text(res)
			}
			call("test_tool_with_logging", nil)
			call("test_tool_with_progress", mcp.Meta{"progressToken": "p-1"})
			if out := call("test_sampling", nil); !strings.Contains(out, "sampled answer") {
				t.Errorf("test_sampling answered %q, want the client's completion in it", out)
			}
			if out := call("test_elicitation", nil); !strings.Contains(out, "accept") {
				t.Errorf("test_elicitation answered %q, want the client's action in it", out)
			}
			eventually(t, 5*time.Second, func() error {
				mu.Lock()
				defer mu.Unlock()
				if len(logs) == 0 || len(progress) == 0 || len(asked) != 2 {
					return fmt.Errorf("logs %v, progress %v, asked %v", logs, progress, asked)
				}
				return nil
			})
		})
	}
	t.Run("2026 client, 2025 upstream", func(t *testing.T) {
		asked := 0
		cs := connect(t, g.url+"/mcp/ev-http", v2026, &mcp.ClientOptions{
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked++
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
			},
		})
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "test_elicitation", Arguments: toolArgs["test_elicitation"]})
		if err != nil || res.IsError || asked != 1 || !strings.Contains(text(res), "accept") {
			t.Fatalf("bridged elicitation: %v, %d questions, %q", err, asked, text(res))
		}
	})
}

// toolArgs are the arguments the everything-server's tools require.
var toolArgs = map[string]map[string]any{
	"test_sampling":    {"prompt": "say hi"},
	"test_elicitation": {"message": "who are you?"},
}

// TestIntegrationListenSubscription: a 2026-07-28 client subscribes to a
// resource on a subscriptions/listen stream through the gateway and gets
// the (2025-era) upstream's notifications/resources/updated there.
func TestIntegrationListenSubscription(t *testing.T) {
	_, g := startEverythingGateway(t)
	updated := make(chan string, 8)
	var cs *mcp.ClientSession
	eventually(t, 20*time.Second, func() error { // the upstream is catalogued
		cs = connect(t, g.url+"/mcp/ev-http", v2026, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
				updated <- r.Params.URI
			},
		})
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "test_simple_text"})
		return err
	})
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	select { // the upstream updates it every 3 s
	case uri := <-updated:
		if uri != "test://watched-resource" {
			t.Fatalf("update of %q", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/resources/updated on the listen stream")
	}
	if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationSubscribeStatelessUpstream: a stateless (2026-07-28)
// upstream takes resource subscriptions only on its own listen streams;
// clients of both eras still get its notifications/resources/updated.
func TestIntegrationSubscribeStatelessUpstream(t *testing.T) {
	addr := freeAddr(t)
	startProc(t, "everything-stateless", bins.Everything(t), "-http", addr, "-stateless=true")
	waitTCP(t, addr)
	g := startGateway(t, loadConfig(t, fmt.Sprintf("call_timeout: 30s\nupstreams:\n  - name: ev\n    url: http://%s/\n", addr)))
	for _, era := range []string{v2025, v2026} {
		t.Run(era, func(t *testing.T) {
			updated := make(chan string, 8)
			var cs *mcp.ClientSession
			eventually(t, 20*time.Second, func() error {
				cs = connect(t, g.url+"/mcp/ev", era, &mcp.ClientOptions{
					ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
						updated <- r.Params.URI
					},
				})
				_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "test_simple_text"})
				return err
			})
			if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
				t.Fatal(err)
			}
			select {
			case uri := <-updated:
				if uri != "test://watched-resource" {
					t.Fatalf("update of %q", uri)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no notifications/resources/updated")
			}
		})
	}
}
