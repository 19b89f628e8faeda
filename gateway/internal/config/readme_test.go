package config

import (
	"os"
	"testing"

	pkgconfig "flashsale/pkg/config"
	"flashsale/tools/configdoc"
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
	env, asked := configdoc.Recorder()
	_, _ = Load(env) // fails validation for want of secrets; every name is read first
	missing, extra := configdoc.Diff(documented, asked())
	if len(missing) > 0 {
		t.Errorf("read by the gateway but not in README's configuration table: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("in README's configuration table for the gateway (or both) but not read by it: %v", extra)
	}
}

// The project's list of known variables (pkg/config/known.go, which decides
// what is an unknown variable) names exactly what this loader reads as
// read by the gateway.
func TestKnownListsEveryVariable(t *testing.T) {
	env, asked := configdoc.Recorder()
	_, _ = Load(env) // fails validation for want of secrets; every name is read first
	missing, extra := configdoc.Diff(pkgconfig.ReadBy(pkgconfig.Gateway), asked())
	if len(missing) > 0 {
		t.Errorf("read by the gateway but not listed for it in pkg/config/known.go (it would reject them as unknown elsewhere): %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("listed for the gateway in pkg/config/known.go but not read by it: %v", extra)
	}
}
