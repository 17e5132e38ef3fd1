package integration

import (
	"os"
	"testing"

	"github.com/switchyard-mcp/switchyard/testutil/bins"
)

// TestMain removes the executables the tests built (testutil/bins) once
// they have run.
func TestMain(m *testing.M) {
	code := m.Run()
	bins.Cleanup()
	os.Exit(code)
}
