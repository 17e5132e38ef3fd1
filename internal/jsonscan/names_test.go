package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var testNames = NewNames("name", "taskId", "progressToken", "_meta", "io.modelcontextprotocol/logLevel")

func TestNamesMatch(t *testing.T) {
	tests := []struct {
		key   string // raw, quoted
		i     int
		exact bool
	}{
		{`"name"`, 0, true},
		{`"Name"`, 0, false},
		{`"NAME"`, 0, false},
		{`"na\u006de"`, 0, true}, // escaped, still exactly "name"
		{`"N\u0061me"`, 0, false},
		{`"n_a-me"`, 0, false},                // encoding/json/v2 ignores '_' and '-' when matching loosely
		{`"taskId"`, 1, true},                 //
		{`"tas` + "\u212a" + `Id"`, 1, false}, // KELVIN SIGN folds to k (encoding/json matches it)
		{`"task_id"`, 1, false},
		{`"progre` + "\u017f" + `sToken"`, 2, false}, // LATIN SMALL LETTER LONG S folds to s
		{`"_meta"`, 3, true},
		{`"meta"`, 3, false},
		{`"_META"`, 3, false},
		{`"IO.modelcontextprotocol/LogLevel"`, 4, false},
		{`"io.modelcontextprotocol/logLevel"`, 4, true},
		{`"names"`, -1, false},
		{`"nam"`, -1, false},
		{`"arguments"`, -1, false},
		{`""`, -1, false},
		{`"_-"`, -1, false},
		{`"na\"me"`, -1, false},
		{`"n` + "\xff" + `ame"`, -1, false}, // invalid UTF-8 decodes to U+FFFD, as encoding/json has it
	}
	for _, tc := range tests {
		i, exact := testNames.Match([]byte(tc.key))
		if i != tc.i || exact != tc.exact {
			t.Errorf("Match(%s) = %d %v, want %d %v", tc.key, i, exact, tc.i, tc.exact)
		}
	}
}

func TestNamesPanics(t *testing.T) {
	for _, names := range [][]string{{"a", "A"}, {"task_id", "taskId"}, {"_"}, {"é"}, make([]string, 65)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewNames(%q) did not panic", names)
				}
			}()
			NewNames(names...)
		}()
	}
}

func TestScan(t *testing.T) {
	tests := []struct {
		obj   string
		clash string
		read  map[string]string // name -> value read through Key
	}{
		{`{"name":"a","arguments":{"Name":"x","name":"y"},"_meta":{}}`, "", map[string]string{"name": `"a"`, "_meta": `{}`}},
		{`{"name":"a","Name":"b"}`, "name", map[string]string{"name": `"a"`}},
		{`{"Name":"b","name":"a"}`, "name", map[string]string{}}, // the first member to be the name loosely holds it
		{`{"name":"a","name":"b"}`, "name", map[string]string{"name": `"a"`}},
		{`{"NAME":"b"}`, "name", map[string]string{}},
		{`{"taskId":"a","task_id":"b","Name":"c"}`, "taskId", map[string]string{"taskId": `"a"`}},
		{`{"x":1,"_meta":{},"meta":{}}`, "_meta", map[string]string{"_meta": `{}`}},
	}
	for _, tc := range tests {
		sc := testNames.Scan()
		read := map[string]string{}
		Members([]byte(tc.obj), func(k, v []byte) {
			if i := sc.Key(k); i >= 0 {
				read[testNames.Name(i)] = string(v)
			}
		})
		clash, ok := sc.Clash()
		if clash != tc.clash || ok != (tc.clash != "") {
			t.Errorf("%s: clash %q %v, want %q", tc.obj, clash, ok, tc.clash)
		}
		if len(read) != len(tc.read) {
			t.Errorf("%s: read %v, want %v", tc.obj, read, tc.read)
		}
		for k, v := range tc.read {
			if read[k] != v {
				t.Errorf("%s: read %v, want %v", tc.obj, read, tc.read)
			}
		}
	}
}

func TestNamesMatchDoesNotAllocate(t *testing.T) {
	keys := [][]byte{[]byte(`"name"`), []byte(`"Name"`), []byte(`"arguments"`), []byte(`"io.modelcontextprotocol/logLevel"`)}
	if n := testing.AllocsPerRun(100, func() {
		sc := testNames.Scan()
		for _, k := range keys {
			sc.Key(k)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per scan of plain keys", n)
	}
}

// loose is the reference for loose matching: strings.EqualFold with '_'
// and '-' taken out.
func loose(a, b string) bool {
	strip := strings.NewReplacer("_", "", "-", "")
	return strings.EqualFold(strip.Replace(a), strip.Replace(b))
}

// decoded are members that encoding/json matches case-insensitively.
type decoded struct {
	Name          json.RawMessage `json:"name"`
	TaskID        json.RawMessage `json:"taskId"`
	ProgressToken json.RawMessage `json:"progressToken"`
}

// FuzzScan: Match agrees with strings.EqualFold (with '_' and '-' taken
// out) on every key; and on every valid JSON object on which a Scan finds
// no clash, encoding/json (which keeps the last member and matches struct
// fields case-insensitively) reads the very member the Scan handed out
// for each name, or none when the Scan saw none: the gateway and a
// lenient upstream read the same message.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","Name":"b"}`, `{"name":"a","arguments":{"Name":1}}`, `{"NAME":1}`, `{"na\u006de":"x","name":"y"}`,
		`{"tas` + "\u212a" + `Id":"x"}`, `{"progre` + "\u017f" + `sToken":1,"progressToken":2}`, `{"task_id":1,"taskId":2}`,
		`{"_meta":{"io.modelcontextprotocol/LOGLEVEL":"debug"}}`, `{"n\u0041me":1}`, `{}`, `[]`, `{"a":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		read := map[string][]byte{}
		sc := testNames.Scan()
		Members(data, func(k, v []byte) {
			u := Unquote(k)
			i, exact := testNames.Match(k)
			for j, name := range testNames.list {
				if loose(u, name) != (i == j) {
					t.Fatalf("Match(%s) = %d, but EqualFold with %q is %v", k, i, name, loose(u, name))
				}
			}
			if i >= 0 && exact != (u == testNames.list[i]) {
				t.Fatalf("Match(%s) exact = %v", k, exact)
			}
			if i := sc.Key(k); i >= 0 {
				read[testNames.Name(i)] = v
			}
		})
		if !json.Valid(data) {
			return
		}
		var d decoded
		if json.Unmarshal(data, &d) != nil {
			return
		}
		if _, clash := sc.Clash(); clash {
			return
		}
		for name, got := range map[string]json.RawMessage{"name": d.Name, "taskId": d.TaskID, "progressToken": d.ProgressToken} {
			want := read[name]
			if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
				t.Fatalf("no clash in %s, but encoding/json reads %s %s where the scan read %s", data, name, got, want)
			}
		}
	})
}
