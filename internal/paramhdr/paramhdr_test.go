package paramhdr

import (
	"net/http"
	"testing"
)

const tool = `{"name":"deploy","inputSchema":{"type":"object","properties":{
	"region":{"type":"string","x-mcp-header":"Region"},
	"n":{"type":"integer","x-mcp-header":"Count"},
	"opts":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry"}}}}}}`

func TestParamhdrBindings(t *testing.T) {
	if got := len(Bindings([]byte(tool))); got != 3 {
		t.Fatalf("%d bindings, want 3", got)
	}
	for _, bad := range []string{
		`{"inputSchema":{"properties":{"a":{"type":"array","x-mcp-header":"A"}}}}`,
		`{"inputSchema":{"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}}`,
		`{"inputSchema":{"properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}}`,
		`{"inputSchema":{"properties":{"a":{"type":"string"}}}}`,
	} {
		if b := Bindings([]byte(bad)); b != nil {
			t.Errorf("%s: bindings %v, want none", bad, b)
		}
	}
}

func TestParamhdrValidate(t *testing.T) {
	b := Bindings([]byte(tool))
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, c := range []struct {
		name string
		h    http.Header
		args string
		ok   bool
	}{
		{"all match", hdr("Mcp-Param-Region", "eu", "Mcp-Param-Count", "3", "Mcp-Param-Dry", "true"), `{"region":"eu","n":3,"opts":{"dry":true}}`, true},
		{"absent args, no headers", hdr(), `{}`, true},
		{"base64 value", hdr("Mcp-Param-Region", Encode("é u ")), `{"region":"é u "}`, true},
		{"mismatch", hdr("Mcp-Param-Region", "us"), `{"region":"eu"}`, false},
		{"missing header", hdr(), `{"region":"eu"}`, false},
		{"header without argument", hdr("Mcp-Param-Region", "eu"), `{}`, false},
		{"bad base64", hdr("Mcp-Param-Region", "=?base64?***?="), `{"region":"eu"}`, false},
		{"number as text", hdr("Mcp-Param-Count", "3.0"), `{"n":3}`, true},
		{"fraction", hdr("Mcp-Param-Count", "3.5"), `{"n":3}`, false},
		// An argument the header mirrors, given twice: a lenient upstream
		// decoder may read the one the header does not match.
		{"argument by case", hdr("Mcp-Param-Region", "eu"), `{"region":"eu","Region":"us"}`, false},
		{"argument twice", hdr("Mcp-Param-Region", "eu"), `{"region":"us","region":"eu"}`, false},
		{"argument only by case", hdr(), `{"REGION":"us"}`, false},
		{"nested argument by case", hdr("Mcp-Param-Dry", "true"), `{"opts":{"dry":true,"DRY":false}}`, false},
		{"nested object by case", hdr("Mcp-Param-Dry", "true"), `{"opts":{"dry":true},"Opts":{"dry":false}}`, false},
		{"unbound argument by case", hdr("Mcp-Param-Region", "eu"), `{"region":"eu","other":1,"Other":2}`, true},
	} {
		err := Validate(b, c.h, []byte(c.args))
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok=%v", c.name, err, c.ok)
		}
	}
	vals := Values(b, []byte(`{"region":"é","n":7}`))
	if vals["Mcp-Param-Region"] != Encode("é") || vals["Mcp-Param-Count"] != "7" || len(vals) != 2 {
		t.Fatalf("values %v", vals)
	}
}

func TestParamhdrValuesEdgeCases(t *testing.T) {
	b := []Binding{{Path: []string{"v"}, Header: "Mcp-Param-V"}}
	for _, c := range []struct {
		args string
		want string // "" : no header
	}{
		{`{"v":1.5}`, ""},
		{`{"v":9007199254740993}`, ""},
		{`{"v":null}`, ""},
		{`{"v":2e3}`, "2000"},
		{`{"v":-7}`, "-7"},
		{`{"v":true}`, "true"},
		{`{"v":"=?base64?abc?="}`, Encode("=?base64?abc?=")},
		{`{"v":"a\u0001b"}`, Encode("a\x01b")},
		{`{"v":" x"}`, Encode(" x")},
		{`{"v":"plain"}`, "plain"},
		{`{"v":{"o":1}}`, ""},
	} {
		got := Values(b, []byte(c.args))["Mcp-Param-V"]
		if got != c.want {
			t.Errorf("Values(%s) = %q, want %q", c.args, got, c.want)
		}
		if c.want != "" && got == c.args {
			t.Errorf("%s: not encoded", c.args)
		}
	}
	if Encode("=?base64?abc?=") == "=?base64?abc?=" || Encode("a\x01b") == "a\x01b" {
		t.Fatal("values that need the wrapper were left plain")
	}
}
