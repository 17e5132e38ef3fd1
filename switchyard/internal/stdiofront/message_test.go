package stdiofront

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestStdioFrontParseClientMsg(t *testing.T) {
	for _, c := range []struct {
		name, line            string
		reply                 string // the error line written instead, if any
		id, method, ver, mcpN string
		request               bool
	}{
		{name: "request", line: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, id: `1`, method: "tools/list", request: true},
		{name: "big id", line: `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, id: `9007199254740993`, method: "ping", request: true},
		{name: "notification", line: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, method: "notifications/initialized"},
		{name: "response", line: `{"jsonrpc":"2.0","id":"s1","result":{"action":"accept"}}`, id: `"s1"`},
		{name: "tools/call 2026", line: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"name":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			id: `2`, method: "tools/call", ver: "2026-07-28", mcpN: "echo", request: true},
		{name: "resources/read names its uri", line: `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a","name":"no"}}`,
			id: `3`, method: "resources/read", mcpN: "file:///a", request: true},
		{name: "not json", line: `not json`, reply: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the stdin line is not JSON"}}`},
		{name: "batch", line: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, reply: `"code":-32600`},
		{name: "object id", line: `{"jsonrpc":"2.0","id":{},"method":"ping"}`, reply: `"id":null,"error":{"code":-32600`},
		{name: "numeric method", line: `{"jsonrpc":"2.0","id":4,"method":5}`, reply: `"id":4,"error":{"code":-32600`},
		{name: "empty method", line: `{"jsonrpc":"2.0","id":4,"method":""}`, reply: `"id":4,"error":{"code":-32600`},
		{name: "neither", line: `{"jsonrpc":"2.0","id":5}`, reply: `"id":5,"error":{"code":-32600`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, reply := parseClientMsg([]byte(c.line))
			if c.reply != "" {
				if m != nil || !strings.Contains(string(reply), c.reply) {
					t.Fatalf("got msg %v, reply %s; want reply containing %s", m, reply, c.reply)
				}
				if !json.Valid(reply) {
					t.Fatalf("reply is not JSON: %s", reply)
				}
				return
			}
			if reply != nil {
				t.Fatalf("unexpected reply %s", reply)
			}
			if string(m.id) != c.id || m.method != c.method || m.version != c.ver || m.name != c.mcpN || m.isRequest() != c.request {
				t.Fatalf("got id=%s method=%q version=%q name=%q request=%v", m.id, m.method, m.version, m.name, m.isRequest())
			}
			if string(m.raw) != c.line {
				t.Fatalf("raw changed: %s", m.raw)
			}
		})
	}
}

func TestStdioFrontIDFinder(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":42,"method":"x"}`, `42`},
		{`{"params":{"id":1,"s":"\"id\":2"},"id":"a,b}"}`, `"a,b}"`},
		{`{"jsonrpc":"2.0","method":"x","params":{"id":7}}`, ``},
		{`{ "id" : 9007199254740993 , "x":[1,{"id":3}]}`, `9007199254740993`},
		{`{"\u0069d":5}`, `5`},
		{`{"idx":5,"xid":6}`, ``},
		{`{"id":{"a":1}}`, ``},
		{`{"id":1,"id":2}`, `2`},
		{`[{"id":1}]`, ``},
		{`{"s":"\\","id":"q\"}"}`, `"q\"}"`},
		{`{"id":null}`, `null`},
		{`{"id":3`, ``}, // never closed: the value is not known to have ended
	} {
		f := &idFinder{}
		// Feed byte by byte too: pieces must not matter.
		for i := 0; i < len(c.in); i++ {
			f.feed([]byte(c.in[i : i+1]))
		}
		if got := string(f.result()); got != c.want {
			t.Errorf("idFinder(%s) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzIDFinder checks the streaming id finder against encoding/json on
// valid objects.
func FuzzIDFinder(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":42,"method":"x"}`, `{"params":{"id":1},"id":"a"}`, `{"\u0069d":-1.5e3}`,
		`{"a":[{"id":1}],"id":null}`, `{"id":"\"","b":"}"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fd := &idFinder{}
		fd.feed(data)
		got := fd.result()
		var m map[string]json.RawMessage
		if !json.Valid(data) || json.Unmarshal(data, &m) != nil {
			return // no promise beyond not panicking
		}
		want, ok := m["id"]
		if !ok || len(want) > maxIDBytes || !scalarID(want) {
			want = nil
		}
		if string(got) != string(want) {
			t.Fatalf("idFinder(%s) = %s, encoding/json %s", data, got, want)
		}
	})
}

func TestStdioFrontLineReader(t *testing.T) {
	big := `{"jsonrpc":"2.0","method":"x","params":{"blob":"` + strings.Repeat("a", 300) + `"},"id":77}`
	in := "{\"a\":1}\r\n\n   \n" + big + "\n{\"b\":2}\n" + strings.Repeat("z", 500) + "\n{\"c\":3}"
	lr := &lineReader{r: bufio.NewReaderSize(strings.NewReader(in), 16), max: 100}
	var got []string
	for {
		l, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if l.tooLong {
			got = append(got, "TOO LONG id="+string(l.id))
		} else {
			got = append(got, string(l.msg))
		}
	}
	want := []string{`{"a":1}`, "TOO LONG id=77", `{"b":2}`, "TOO LONG id=", `{"c":3}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines:\n got %q\nwant %q", got, want)
	}
}

func TestStdioFrontSSE(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
		lastID   string
		retry    time.Duration
	}{
		{name: "two events", in: "event: message\ndata: {\"a\":1}\n\ndata: {\"b\":2}\n\n", want: []string{`{"a":1}`, `{"b":2}`}},
		{name: "multi-line data joined", in: "data: {\"a\":\ndata:  1}\n\n", want: []string{"{\"a\":\n 1}"}},
		{name: "CRLF and CR", in: "data: 1\r\n\r\ndata: 2\r\rdata: 3\n\n", want: []string{"1", "2", "3"}},
		{name: "comments, other types, empty data", in: ": ping\n\nevent: prime\nid: p-0\ndata:\n\nevent: other\ndata: x\n\ndata: y\n\n", want: []string{"y"}, lastID: "p-0"},
		{name: "priming event without data sets the id", in: "id: s-3\nevent: prime\n\n", lastID: "s-3"},
		{name: "id with NUL ignored, retry", in: "id: a\nretry: 1500\ndata: 1\n\nid: b\x00c\ndata: 2\n\n", want: []string{"1", "2"}, lastID: "a", retry: 1500 * time.Millisecond},
		{name: "last event without blank line dropped", in: "data: 1\n\ndata: 2\n", want: []string{"1"}},
		{name: "no space after colon", in: "data:{}\n\n", want: []string{"{}"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &sseState{}
			var got []string
			err := readSSE(strings.NewReader(c.in), 1<<20, st, func(d []byte) error {
				got = append(got, string(d))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
				t.Fatalf("events %q, want %q", got, c.want)
			}
			if st.lastID != c.lastID || st.retry != c.retry {
				t.Fatalf("lastID %q retry %v, want %q %v", st.lastID, st.retry, c.lastID, c.retry)
			}
		})
	}
	t.Run("too large", func(t *testing.T) {
		err := readSSE(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 50, &sseState{}, func([]byte) error { return nil })
		if !errors.Is(err, errEventTooLarge) {
			t.Fatalf("err = %v, want errEventTooLarge", err)
		}
	})
}

func TestStdioFrontParseHeader(t *testing.T) {
	for _, c := range []struct{ in, name, value, err string }{
		{in: "Authorization: Bearer abc", name: "Authorization", value: "Bearer abc"},
		{in: "x-tenant:acme", name: "X-Tenant", value: "acme"},
		{in: "X-Empty:", name: "X-Empty", value: ""},
		{in: "no colon here", err: "want"},
		{in: ": v", err: "want"},
		{in: "Bad Name: v", err: "token"},
		{in: "Mcp-Session-Id: x", err: "set by switchyard stdio"},
		{in: "accept: */*", err: "set by switchyard stdio"},
	} {
		name, value, err := ParseHeader(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseHeader(%q) err = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || name != c.name || value != c.value {
			t.Errorf("ParseHeader(%q) = %q, %q, %v", c.in, name, value, err)
		}
	}
}
