package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The list of known variables agrees with the repository: every
// FLASHSALE_* name its code, scripts and Makefile use is on it (or a new
// variable would be rejected by the binaries as unknown), and every name on
// it is still used somewhere (or a dropped variable would stay accepted).
// The loaders' own tests check which program reads which name.
func TestKnownAgreesWithTheRepository(t *testing.T) {
	root := filepath.Join("..", "..")
	name := regexp.MustCompile(`FLASHSALE_[A-Z0-9_]*[A-Z0-9]`)
	used := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		n := d.Name()
		// Tests invent names to prove they are refused; known.go is the list.
		if strings.HasSuffix(n, "_test.go") || n == "known.go" ||
			!(strings.HasSuffix(n, ".go") || strings.HasSuffix(n, ".sh") || n == "Makefile") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range name.FindAllString(string(b), -1) {
			used[m] = append(used[m], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sortedUsed(used) {
		if readers(n) == 0 {
			t.Errorf("%s is used in %v but not in known.go: add it with the programs that read it", n, used[n])
		}
	}
	for n := range known {
		if len(used[n]) == 0 {
			t.Errorf("%s is in known.go but no code or script of the repository uses it: remove it", n)
		}
	}
}

func sortedUsed(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
