package tenancy

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/internal/config"
	"github.com/switchyard-mcp/switchyard/proto"
)

// TestFromFileTaskKey: tasks.key_file becomes the plan's fixed task key;
// a file that holds no key is a problem (New fails), named by its path.
func TestFromFileTaskKey(t *testing.T) {
	dir := t.TempDir()
	key := bytes.Repeat([]byte{3}, config.TaskKeyBytes)
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := FromFile(&config.File{Tasks: config.TasksFile{KeyFile: good}})
	if len(c.Problems) != 0 || !bytes.Equal(c.Provision.Fixed[proto.KeyTasks], key) {
		t.Fatalf("good file: %v %x", c.Problems, c.Provision.Fixed)
	}
	c = FromFile(&config.File{Tasks: config.TasksFile{KeyFile: bad}})
	if len(c.Problems) != 1 || !strings.Contains(c.Problems[0].Error(), bad) || c.Provision.Fixed != nil {
		t.Fatalf("bad file: %v", c.Problems)
	}
}
