package config

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// TestTaskKeyFile: the key file holds the base64 of 32 bytes (a trailing
// newline allowed); anything else is an error that names the file and
// not what it holds; SWITCHYARD_TASK_KEY_FILE sets the file.
func TestTaskKeyFile(t *testing.T) {
	key := bytes.Repeat([]byte{0xab}, TaskKeyBytes)
	files := map[string]string{
		"good":  base64.StdEncoding.EncodeToString(key) + "\n",
		"short": base64.StdEncoding.EncodeToString(key[:16]),
		"junk":  "not-base64-SECRETISH!",
	}
	read := func(p string) ([]byte, error) {
		if v, ok := files[p]; ok {
			return []byte(v), nil
		}
		return nil, fs.ErrNotExist
	}
	if k, err := (TasksFile{}).Key(read); k != nil || err != nil {
		t.Fatalf("no file: %v %v", k, err)
	}
	if k, err := (TasksFile{KeyFile: "good"}).Key(read); err != nil || !bytes.Equal(k, key) {
		t.Fatalf("good: %x %v", k, err)
	}
	for _, p := range []string{"short", "junk", "missing"} {
		_, err := TasksFile{KeyFile: p}.Key(read)
		if err == nil || !strings.Contains(err.Error(), "tasks.key_file") || strings.Contains(err.Error(), "SECRETISH") {
			t.Errorf("%s: %v", p, err)
		}
		if p == "missing" && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing: %v", err)
		}
	}
	var f File
	f.applyEnv(func(k string) string {
		if k == EnvTaskKeyFile {
			return "/run/secrets/task.key"
		}
		return ""
	})
	if f.Tasks.KeyFile != "/run/secrets/task.key" {
		t.Fatalf("from the environment: %q", f.Tasks.KeyFile)
	}
}
