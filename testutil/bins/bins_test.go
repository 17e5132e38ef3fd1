package bins

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCleanup: Cleanup removes the build directory and forgets what was
// built in it, and a later build gets a new directory.
func TestCleanup(t *testing.T) {
	d := binDir(t)
	p := filepath.Join(d, "tool")
	if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	built["tool"] = p
	mu.Unlock()
	Cleanup()
	if _, err := os.Stat(d); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", d, err)
	}
	if _, ok := built["tool"]; ok {
		t.Fatal("built still names the removed executable")
	}
	d2 := binDir(t)
	defer Cleanup()
	if d2 == d {
		t.Fatalf("binDir reused the removed %s", d)
	}
	if _, err := os.Stat(d2); err != nil {
		t.Fatal(err)
	}
}
