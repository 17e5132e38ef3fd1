package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDevPrivateDir: dev's NATS credentials directory (by default a
// predictable path under the temporary directory) is used only if this
// user made it and nobody else can read it.
func TestDevPrivateDir(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	own := mk("own", 0o700)
	open := mk("open", 0o755)
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{ // dir -> accepted
		filepath.Join(base, "missing"): true,
		own:                            true,
		open:                           false,
		file:                           false,
		link:                           false,
	}
	if os.Getuid() == 0 { // root can make a directory another user owns
		other := mk("other", 0o700)
		if err := os.Chown(other, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		cases[other] = false
	}
	for dir, ok := range cases {
		if err := privateDir(dir); (err == nil) != ok {
			t.Errorf("privateDir(%s) = %v, want accepted %v", filepath.Base(dir), err, ok)
		}
	}
}
