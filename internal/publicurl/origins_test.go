package publicurl

import "testing"

// TestOrigins: exact origins, "*" patterns (host labels, ports), "*" for
// all; case ignored; what an attacker could make of a pattern refused.
func TestOrigins(t *testing.T) {
	o, err := ParseOrigins([]string{"https://App.example.com", "https://*.corp.example", "http://localhost:*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		origin string
		want   bool
	}{
		{"https://app.example.com", true},
		{"HTTPS://APP.EXAMPLE.COM", true},
		{"http://app.example.com", false},
		{"https://app.example.com:8443", false},
		{"https://evil.com", false},
		{"https://a.corp.example", true},
		{"https://a.b.corp.example", true},
		{"https://corp.example", false},
		{"https://evilcorp.example", false},
		{"https://a.corp.example.evil.com", false},
		{"https://a.corp.example:444", false},
		{"http://localhost:3000", true},
		{"http://localhost", false},
		{"http://localhost:3000.evil.com", false},
		{"null", false},
		{"", false},
	} {
		if got := o.Allowed(tc.origin); got != tc.want {
			t.Errorf("Allowed(%q) = %v, want %v", tc.origin, got, tc.want)
		}
	}
	all, err := ParseOrigins([]string{"*"})
	if err != nil || !all.Allowed("https://anything.example") || !all.Allowed("null") {
		t.Errorf("* allows: %v %v", all.Allowed("https://anything.example"), err)
	}
	var none *Origins
	if none.Allowed("https://a.example") {
		t.Error("a nil set allows")
	}
	for _, bad := range []string{"app.example.com", "ftp://a.example", "https://a.example/path", "https://user@a.example", "https://", "https://a.example?x"} {
		if _, err := ParseOrigins([]string{bad}); err == nil {
			t.Errorf("ParseOrigins(%q): no error", bad)
		}
	}
}
