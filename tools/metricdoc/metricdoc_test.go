package metricdoc_test

import (
	"os"
	"path/filepath"
	"testing"

	"flashsale/tools/metricdoc"
)

func TestDocumentedAndDiff(t *testing.T) {
	readme := filepath.Join(t.TempDir(), "README.md")
	text := "# x\n\n| `not_a_metric` | in another section |\n\n## Metrics\n\n| Metric | Type |\n|---|---|\n" +
		"| `flashsale_gateway_a_total` | counter |\n| `flashsale_gateway_b` | gauge |\n| `flashsale_ordersvc_c` | gauge |\n\n## Next\n\n| `later` | x |\n"
	if err := os.WriteFile(readme, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := metricdoc.Documented(readme)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc) != 3 || !doc["flashsale_gateway_a_total"] || doc["not_a_metric"] || doc["later"] {
		t.Fatalf("documented %v, want the three rows of the Metrics section", doc)
	}
	tests := []struct {
		name  string
		exist map[string]bool
		clean bool
	}{
		{"same names", map[string]bool{"flashsale_gateway_a_total": true, "flashsale_gateway_b": true, "go_goroutines": true}, true},
		{"one undocumented", map[string]bool{"flashsale_gateway_a_total": true, "flashsale_gateway_b": true, "flashsale_gateway_new": true}, false},
		{"one stale", map[string]bool{"flashsale_gateway_a_total": true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := metricdoc.Diff(doc, tt.exist, "flashsale_gateway_"); (d == "") != tt.clean {
				t.Errorf("diff %q, want clean %v", d, tt.clean)
			}
		})
	}
	if _, err := metricdoc.Documented(filepath.Join(t.TempDir(), "none.md")); err == nil {
		t.Error("a missing README gave no error")
	}
}
