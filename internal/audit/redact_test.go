package audit

import (
	"errors"
	"strings"
	"testing"
)

func TestAuditRedactPaths(t *testing.T) {
	cases := []struct {
		name  string
		paths []string
		args  string
		res   string
		wantA string
		wantR string
	}{
		{
			name:  "field",
			paths: []string{"arguments.password"},
			args:  `{"user":"u","password":"hunter2"}`,
			wantA: `{"password":"[REDACTED]","user":"u"}`,
		},
		{
			name:  "nested object replaced whole",
			paths: []string{"arguments.card"},
			args:  `{"card":{"number":"4111","cvc":123},"n":1}`,
			wantA: `{"card":"[REDACTED]","n":1}`,
		},
		{
			name:  "array elements",
			paths: []string{"result.content[*].text"},
			res:   `{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"isError":false}`,
			wantR: `{"content":[{"text":"[REDACTED]","type":"text"},{"text":"[REDACTED]","type":"text"}],"isError":false}`,
		},
		{
			name:  "index",
			paths: []string{"result.content[1].text"},
			res:   `{"content":[{"text":"a"},{"text":"b"}]}`,
			wantR: `{"content":[{"text":"a"},{"text":"[REDACTED]"}]}`,
		},
		{
			name:  "wildcard key",
			paths: []string{"arguments.*.ssn"},
			args:  `{"a":{"ssn":"1"},"b":{"ssn":"2","x":3},"c":4}`,
			wantA: `{"a":{"ssn":"[REDACTED]"},"b":{"ssn":"[REDACTED]","x":3},"c":4}`,
		},
		{
			name:  "any depth",
			paths: []string{"arguments.**.email"},
			args:  `{"email":"a@x","p":{"q":[{"email":"b@x"}]}}`,
			wantA: `{"email":"[REDACTED]","p":{"q":[{"email":"[REDACTED]"}]}}`,
		},
		{
			name:  "path into the other root leaves this one",
			paths: []string{"result.text"},
			args:  `{"text":"kept"}`,
			wantA: `{"text":"kept"}`,
		},
		{
			name:  "missing paths and wrong types are no-ops",
			paths: []string{"arguments.a.b.c", "arguments.list[5]", "arguments.s[*]"},
			args:  `{"a":1,"list":[1],"s":"str"}`,
			wantA: `{"a":1,"list":[1],"s":"str"}`,
		},
		{
			name:  "numbers keep their text",
			args:  `{"big":12345678901234567890,"f":1.50}`,
			wantA: `{"big":12345678901234567890,"f":1.50}`,
		},
		{
			name:  "invalid JSON is not recorded",
			args:  `{"password": "hunter2"`,
			wantA: `"[REDACTED]"`,
		},
		{
			name:  "two values are not recorded",
			args:  `{} {"password":"x"}`,
			wantA: `"[REDACTED]"`,
		},
		{
			name:  "credential keys at any depth",
			args:  `{"headers":{"Authorization":"Basic dXNlcjpwYXNz","X-Api-Key":"k1"},"opts":[{"access_token":"t","client_secret":{"a":1}}]}`,
			wantA: `{"headers":{"Authorization":"[REDACTED]","X-Api-Key":"[REDACTED]"},"opts":[{"access_token":"[REDACTED]","client_secret":"[REDACTED]"}]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRedactor(tc.paths)
			if err != nil {
				t.Fatal(err)
			}
			if tc.args != "" {
				if got := string(r.RedactArguments([]byte(tc.args))); got != tc.wantA {
					t.Errorf("arguments:\n got %s\nwant %s", got, tc.wantA)
				}
			}
			if tc.res != "" {
				if got := string(r.RedactResult([]byte(tc.res))); got != tc.wantR {
					t.Errorf("result:\n got %s\nwant %s", got, tc.wantR)
				}
			}
		})
	}
}

func TestAuditRedactBadPaths(t *testing.T) {
	for _, p := range []string{"password", "args.x", "arguments", "arguments.", "arguments.a..b", "arguments.a[", "arguments.a[x]", "arguments.a[-1]", "result.a[1]b"} {
		if _, err := NewRedactor([]string{p}); !errors.Is(err, ErrBadPath) {
			t.Errorf("NewRedactor(%q) = %v, want ErrBadPath", p, err)
		}
	}
	_, err := NewRedactor([]string{"x.y", "arguments.ok", "z"})
	if err == nil || strings.Count(err.Error(), "bad redact path") != 2 {
		t.Errorf("two bad paths: %v, want both reported", err)
	}
}

const (
	testAPIKey = "syk_0123456789abcdef_SECRETSECRETSECRETSECRETSECRETxx"
	testJWT    = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlc2lnbmF0dXJl"
)

func TestAuditScrubString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text, nothing to see", "plain text, nothing to see"},
		{"key " + testAPIKey + " end", "key [REDACTED] end"},
		{"Authorization: Bearer abc.def-ghi_jkl~mno+/==", "Authorization: Bearer [REDACTED]"},
		{"bearer\t" + testJWT, "bearer\t[REDACTED]"},
		{"token=" + testJWT, "token=[REDACTED]"},
		{"Basic dXNlcjpwYXNz", "Basic [REDACTED]"},
		{"file:///x?token=abc&page=2", "file:///x?token=[REDACTED]&page=2"},
		{"https://h/p?a=1&api_key=zzz#f", "https://h/p?a=1&api_key=[REDACTED]#f"},
		{"a=b", "a=b"},
		{"a basic idea", "a basic [REDACTED]"}, // the shape wins over the sense: over-scrubbing is the safe side
		{"eyJ alone", "eyJ alone"},
		{"https://app/cb#access_token=abc&state=x", "https://app/cb#access_token=[REDACTED]&state=x"},
		{"s3://b/o?X-Amz-Signature=abc&github_token=ghp_1&n=1", "s3://b/o?X-Amz-Signature=[REDACTED]&github_token=[REDACTED]&n=1"},
		{"https://h/p?sig=s1&refresh_token=r1", "https://h/p?sig=[REDACTED]&refresh_token=[REDACTED]"},
	}
	for _, tc := range cases {
		if got := ScrubString(tc.in); got != tc.want {
			t.Errorf("ScrubString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAuditSecretKey(t *testing.T) {
	for _, k := range []string{"Authorization", "authorization", "X-API-KEY", "api_key", "apiKey", "access_token", "Refresh-Token", "password", "client_secret", "Cookie",
		"github_token", "OPENAI_API_KEY", "aws-secret", "db_password", "ssh_private_key", "gcp_credentials", "X-Goog-Api-Key"} {
		if !SecretKey(k) {
			t.Errorf("SecretKey(%q) = false", k)
		}
	}
	for _, k := range []string{"name", "query", "tokens_used", "max_tokens", "auth_method", "secretary", "keyword", strings.Repeat("a", 70)} {
		if SecretKey(k) {
			t.Errorf("SecretKey(%q) = true", k)
		}
	}
}

func TestAuditRedactDepthBound(t *testing.T) {
	r, _ := NewRedactor(nil)
	deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	if got := string(r.RedactArguments([]byte(deep))); got != `"[REDACTED]"` {
		t.Errorf("100 levels deep: %s, want the whole value redacted", got)
	}
	ok := strings.Repeat("[", 10) + `"` + testAPIKey + `"` + strings.Repeat("]", 10)
	if got := string(r.RedactArguments([]byte(ok))); strings.Contains(got, "SECRET") {
		t.Errorf("key 10 levels deep kept: %s", got)
	}
}
