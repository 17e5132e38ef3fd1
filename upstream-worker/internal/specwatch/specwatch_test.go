package specwatch

import (
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/proto"
)

func TestSpecwatchDecode(t *testing.T) {
	enc := func(s proto.UpstreamSpec) []byte {
		b, err := proto.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name, key string
		value     []byte
		err       string // "" : valid
	}{
		{"streamable", "a", enc(proto.UpstreamSpec{Name: "a", Transport: proto.TransportStreamable, URL: "http://x"}), ""},
		{"stdio", "b", enc(proto.UpstreamSpec{Name: "b", Transport: proto.TransportStdio, Command: []string{"srv"}}), ""},
		{"name differs from key", "a", enc(proto.UpstreamSpec{Name: "b", Transport: proto.TransportSSE, URL: "http://x"}), "equal to the key"},
		{"not a slug", "A.b", enc(proto.UpstreamSpec{Name: "A.b", Transport: proto.TransportSSE, URL: "http://x"}), "slug"},
		{"no url", "a", enc(proto.UpstreamSpec{Name: "a", Transport: proto.TransportStreamable}), "url required"},
		{"no command", "a", enc(proto.UpstreamSpec{Name: "a", Transport: proto.TransportStdio}), "command required"},
		{"unknown transport", "a", enc(proto.UpstreamSpec{Name: "a", Transport: "ws"}), "unknown transport"},
		{"garbage", "a", []byte{0xc1}, "upstream \"a\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.key, tc.value)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Decode: %v, want %q", err, tc.err)
			}
		})
	}
}
