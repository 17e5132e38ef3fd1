package config

import (
	"bytes"
	"encoding/base64"
	"fmt"
)

// EnvTaskKeyFile names the file of [TasksFile.KeyFile].
const EnvTaskKeyFile = "SWITCHYARD_TASK_KEY_FILE"

// TaskKeyBytes is the length of the task id sealing key.
const TaskKeyBytes = 32

// TasksFile is the tasks section: how the gateway's task ids are sealed.
type TasksFile struct {
	// KeyFile is a file holding the key that seals the task ids workers
	// hand out (KV switchyard_keys, key "tasks"): the standard base64 of
	// 32 random bytes (`head -c 32 /dev/urandom | base64`). tenancy-svc
	// reads it (and `switchyard nats provision` run as tenancy-svc), and
	// writes it to the bucket at start and whenever the store is made
	// again, so task ids survive the loss of the NATS store. Without it
	// tenancy-svc makes a random key when there is none.
	// Env SWITCHYARD_TASK_KEY_FILE.
	KeyFile string `yaml:"key_file"`
}

// Key reads and decodes the key of KeyFile with read (os.ReadFile); nil
// without a KeyFile. Errors name the file, never its content.
func (t TasksFile) Key(read func(string) ([]byte, error)) ([]byte, error) {
	if t.KeyFile == "" {
		return nil, nil
	}
	b, err := read(t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tasks.key_file: %w", err)
	}
	k, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(b)))
	clear(b)
	if err != nil || len(k) != TaskKeyBytes {
		clear(k)
		return nil, fmt.Errorf("tasks.key_file %s: want the base64 of %d bytes", t.KeyFile, TaskKeyBytes)
	}
	return k, nil
}
