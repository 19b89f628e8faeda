package config

import (
	"os"
	"testing"

	"flashsale/pkg/configdoc"
)

// The README's configuration table lists every variable this loader reads,
// and no gateway variable it ignores.
func TestREADMEListsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented, err := configdoc.Documented(readme, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	getenv, asked := configdoc.Recorder()
	_, _ = Load(getenv) // fails validation for want of secrets; every name is read first
	missing, extra := configdoc.Diff(documented, asked())
	if len(missing) > 0 {
		t.Errorf("read by the gateway but not in README's configuration table: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("in README's configuration table for the gateway (or both) but not read by it: %v", extra)
	}
}
