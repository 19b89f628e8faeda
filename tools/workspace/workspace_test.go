package workspace_test

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"flashsale/tools/testenv"
)

// root is the repository: the directory of the go.work in use.
func root(t *testing.T) string {
	t.Helper()
	dir, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// workModules is go.work's use block, as go itself reads it.
func workModules(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("go", "work", "edit", "-json")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go work edit -json: %v", err)
	}
	var w struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatalf("decode go work edit -json: %v", err)
	}
	var mods []string
	for _, u := range w.Use {
		mods = append(mods, filepath.ToSlash(filepath.Clean(u.DiskPath)))
	}
	return mods
}

// makeModules is what the Makefile's loops iterate over.
func makeModules(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("make", "-s", "modules")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -s modules: %v", err)
	}
	return strings.Fields(string(out))
}

// readmeModules is the first column of the table under README.md's
// "## Modules" heading.
func readmeModules(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mods []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Modules"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
		mods = append(mods, strings.TrimSuffix(cell, "/"))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return mods
}

// goModDirs is every directory of the tree with a go.mod, so a module
// added without go.work (or left behind by a removal) is caught too.
func goModDirs(t *testing.T, dir string) []string {
	t.Helper()
	var mods []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			rel, err := filepath.Rel(dir, filepath.Dir(path))
			if err != nil {
				return err
			}
			mods = append(mods, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

func TestModuleListsAgree(t *testing.T) {
	dir := root(t)
	want := workModules(t, dir)
	if len(want) == 0 {
		t.Fatal("go.work uses no module")
	}
	sorted := slices.Sorted(slices.Values(want))
	for _, tc := range []struct {
		name    string
		got     []string
		ordered bool // the Makefile keeps go.work's order: it is make test's order
	}{
		{name: "Makefile", got: makeModules(t, dir), ordered: true},
		{name: "README.md ## Modules", got: slices.Sorted(slices.Values(readmeModules(t, dir)))},
		{name: "go.mod files in the tree", got: slices.Sorted(slices.Values(goModDirs(t, dir)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := sorted
			if tc.ordered {
				w = want
			}
			if !slices.Equal(tc.got, w) {
				t.Errorf("%s lists %q, go.work uses %q", tc.name, tc.got, w)
			}
		})
	}
}

// Every module requiring another of the workspace replaces it with its
// folder, so GOWORK=off builds find it too (go.work's use does that only
// with the workspace on).
func TestEveryModuleReplacesWhatItRequires(t *testing.T) {
	dir := root(t)
	paths := map[string]string{} // module path -> folder
	mods := workModules(t, dir)
	edits := map[string]modEdit{}
	for _, m := range mods {
		e := goModEdit(t, filepath.Join(dir, m))
		edits[m] = e
		paths[e.Module.Path] = m
	}
	for _, m := range mods {
		t.Run(m, func(t *testing.T) {
			replaced := map[string]string{}
			for _, r := range edits[m].Replace {
				replaced[r.Old.Path] = filepath.ToSlash(filepath.Clean(filepath.Join(m, r.New.Path)))
			}
			for _, r := range edits[m].Require {
				folder, ours := paths[r.Path]
				if !ours {
					continue
				}
				if got := replaced[r.Path]; got != folder {
					t.Errorf("requires %s, replaced by %q, want %q", r.Path, got, folder)
				}
			}
		})
	}
}

type modEdit struct {
	Module  struct{ Path string }
	Require []struct{ Path string }
	Replace []struct {
		Old struct{ Path string }
		New struct{ Path string }
	}
}

func goModEdit(t *testing.T, dir string) modEdit {
	t.Helper()
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json in %s: %v", dir, err)
	}
	var e modEdit
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("decode go mod edit -json of %s: %v", dir, err)
	}
	return e
}
