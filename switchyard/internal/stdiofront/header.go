package stdiofront

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// managed are the headers the bridge sets itself; Config.Header may not
// name them.
var managed = []string{
	"Accept", "Content-Type", "Content-Length", "Host", "Last-Event-Id",
	"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name",
}

// ParseHeader splits a "Name: value" flag into a header name and value,
// checking that the name is an HTTP token the bridge does not manage and
// that the value holds no line break.
func ParseHeader(s string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" {
		// Not echoed: the text may hold a credential.
		return "", "", errors.New(`header: want "Name: value"`)
	}
	if err := checkHeaderName(name); err != nil {
		return "", "", err
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return "", "", fmt.Errorf("header %s: the value holds a line break or NUL", name)
	}
	return http.CanonicalHeaderKey(name), value, nil
}

func checkHeaderName(name string) error {
	for _, c := range name {
		if c > 0x7e || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return fmt.Errorf("header name %q: not an HTTP token", name)
		}
	}
	for _, m := range managed {
		if strings.EqualFold(name, m) {
			return fmt.Errorf("header %s: set by switchyard stdio itself", name)
		}
	}
	return nil
}
