package configdoc

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

const readme = `# x

## Configuration

| variable | default | who | meaning |
|---|---|---|---|
| ` + "`FLASHSALE_A`" + ` | 1 | both | a |
| ` + "`FLASHSALE_B` / `FLASHSALE_C`" + ` | 2 | gateway | b and c |
| ` + "`FLASHSALE_D`" + ` | 3 | ordersvc | d |

## Layout

| ` + "`FLASHSALE_E`" + ` | x | both | another section's table |
`

func TestDocumented(t *testing.T) {
	tests := []struct {
		name   string
		binary string
		want   map[string]bool
	}{
		// "both" rows count for each binary; every full name in a row does.
		{"gateway", "gateway", map[string]bool{"FLASHSALE_A": true, "FLASHSALE_B": true, "FLASHSALE_C": true}},
		{"ordersvc", "ordersvc", map[string]bool{"FLASHSALE_A": true, "FLASHSALE_D": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Documented([]byte(readme), tt.binary)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Documented (-want +got):\n%s", d)
			}
		})
	}
	if _, err := Documented([]byte("# no table\n"), "gateway"); err == nil {
		t.Error("a README without the table gave no error")
	}
}

func TestRecorderAndDiff(t *testing.T) {
	env, asked := Recorder()
	for _, k := range []string{"FLASHSALE_A", "FLASHSALE_KEY", "FLASHSALE_KEY_FILE", "FLASHSALE_ONLY_FILE", "HOME"} {
		if v, ok := env.Lookup(k); ok || v != "" {
			t.Errorf("Lookup(%s) = %q, %v, want unset", k, v, ok)
		}
	}
	read := asked()
	// NAME_FILE of a secret is the README's general rule; a _FILE name
	// with no base is a variable of its own; other names are not ours.
	if d := cmp.Diff(map[string]bool{"FLASHSALE_A": true, "FLASHSALE_KEY": true, "FLASHSALE_ONLY_FILE": true}, read); d != "" {
		t.Fatalf("asked (-want +got):\n%s", d)
	}
	missing, extra := Diff(map[string]bool{"FLASHSALE_A": true, "FLASHSALE_GONE": true}, read)
	if d := cmp.Diff([]string{"FLASHSALE_KEY", "FLASHSALE_ONLY_FILE"}, missing); d != "" {
		t.Errorf("missing (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"FLASHSALE_GONE"}, extra); d != "" {
		t.Errorf("extra (-want +got):\n%s", d)
	}
}
