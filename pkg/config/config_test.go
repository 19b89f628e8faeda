package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseFile(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    map[string]string
		wantErr []string // substrings, one per error, in order
	}{
		{name: "plain, blank and comment lines", file: "# comment\n\nA=1\n  B = two words \n", want: map[string]string{"A": "1", "B": "two words"}},
		{name: "comment after whitespace is dropped", file: "A=v # note\nB=v\t# tab note\n", want: map[string]string{"A": "v", "B": "v"}},
		{name: "hash inside a word stays", file: "A=pass#word\nB=#start\n", want: map[string]string{"A": "pass#word", "B": "#start"}},
		{name: "quoted values keep their hashes and spaces", file: `A="v # not a note" # note` + "\nB=' x '\n", want: map[string]string{"A": "v # not a note", "B": " x "}},
		{name: "export prefix", file: "export A=1\nexport\tB=2\nexporter=3\n", want: map[string]string{"A": "1", "B": "2", "exporter": "3"}},
		{name: "empty value is a value", file: "A=\nB=  # only a note\nC=\"\"\n", want: map[string]string{"A": "", "B": "", "C": ""}},
		{name: "later line wins", file: "A=1\nA=2\n", want: map[string]string{"A": "2"}},
		{name: "CRLF line ends", file: "A=1\r\nB=2\r\n", want: map[string]string{"A": "1", "B": "2"}},
		{name: "every bad line reported with its number", file: "A=1\nnot a setting\nB C=1\nD=\"open\nE='x' y\n",
			want:    map[string]string{"A": "1"},
			wantErr: []string{"2: want KEY=VALUE", `3: key "B C"`, "4: D: unterminated quote", "5: E: text after the closing quote"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := ParseFile([]byte(tt.file))
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("values (-want +got):\n%s", d)
			}
			if len(errs) != len(tt.wantErr) {
				t.Fatalf("got errors %v, want %d", errs, len(tt.wantErr))
			}
			for i, w := range tt.wantErr {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d: got %q, want it to start with %q", i, errs[i], w)
				}
			}
		})
	}
}

func TestSourcePrecedenceAndErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "flashsale.env")
	secret := filepath.Join(dir, "key")
	writeFile(t, file, "# comment\nA=from-file # the file's\nB=7\nC=1s\nE=from-file\nN=5\nS=in-file\nexport X=exported\n")
	writeFile(t, secret, "s3cret\n")
	env := Vars{"FLASHSALE_CONFIG": file, "A": "from-env", "BAD_INT": "x", "BAD_DUR": "5", "K_FILE": secret,
		"E": "", "N": "", "S": "", "S_FILE": secret}
	s := NewSource(env)

	tests := []struct {
		name string
		got  any
		want any
	}{
		{"env beats file", s.String("A", "def"), "from-env"},
		{"file beats default", s.Int("B", 1), 7},
		{"default when unset", s.String("UNSET", "def"), "def"},
		{"duration from file", s.Duration("C", 0), time.Second},
		{"export line read", s.String("X", ""), "exported"},
		{"empty env beats file", s.String("E", "def"), ""},
		{"empty env number is the default, not the file's", s.Int("N", 3), 3},
		{"empty secret gives way to its file", string(s.Secret("S")), "s3cret"},
		{"secret from file trimmed", string(s.Secret("K")), "s3cret"},
		{"bad int keeps default", s.Int("BAD_INT", 3), 3},
		{"bad duration keeps default", s.Duration("BAD_DUR", time.Minute), time.Minute},
		{"set in the file", s.IsSet("B"), true},
		{"set empty in the environment", s.IsSet("E"), true},
		{"not set", s.IsSet("UNSET"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	err := s.Err()
	if err == nil || !strings.Contains(err.Error(), "BAD_INT") || !strings.Contains(err.Error(), "BAD_DUR") {
		t.Errorf("Err() = %v, want both bad settings named", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Error("secret leaked into an error")
	}
}

func TestBadFileNamesItsLines(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.env")
	writeFile(t, file, "FLASHSALE_LOG_LEVEL=debug\nnonsense\n")
	err := NewSource(Vars{"FLASHSALE_CONFIG": file}).Err()
	if err == nil || !strings.Contains(err.Error(), "FLASHSALE_CONFIG: "+file+":2: want KEY=VALUE") {
		t.Errorf("got %v, want the file and line named", err)
	}
}

func TestRejectUnknown(t *testing.T) {
	tests := []struct {
		name string
		file string
		env  Vars
		want []string // every one in the error; none means no error
	}{
		{name: "known names of every program", file: "FLASHSALE_LOG_LEVEL=info\nFLASHSALE_GATE_KEY_FILE=/k\n",
			env: Vars{"FLASHSALE_STACK_DIR": "/s", "FLASHSALE_BATCH_SIZE": "1", "FLASHSALE_ADMIN_TOKEN_FILE": "/t", "HOME": "/root", "PATH": "/bin"}},
		{name: "misspelled variable", env: Vars{"FLASHSALE_REDIS_ADRR": "x"},
			want: []string{"FLASHSALE_REDIS_ADRR: unknown variable", "did you mean FLASHSALE_REDIS_ADDR?"}},
		{name: "unknown names in file and environment all reported", file: "FLASHSALE_LIMIT_PURCHASE_USR=1/1\nREDIS_ADDR=x\nWHATEVER=1\n",
			env: Vars{"FLASHSALE_NOTHING_LIKE_IT": "1"},
			want: []string{"FLASHSALE_LIMIT_PURCHASE_USR: unknown key in", "did you mean FLASHSALE_LIMIT_PURCHASE_USER?",
				"REDIS_ADDR: unknown key", "did you mean FLASHSALE_REDIS_ADDR?", "WHATEVER: unknown key",
				"FLASHSALE_NOTHING_LIKE_IT: unknown variable: no flashsale program reads it\n"}},
		// The file is read only by loaders: the stack's variables there
		// would silently do nothing.
		{name: "stack variable in the file", file: "FLASHSALE_STACK_DIR=/s\n", want: []string{"FLASHSALE_STACK_DIR: unknown key in"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := Vars{}
			for k, v := range tt.env {
				env[k] = v
			}
			if tt.file != "" {
				env["FLASHSALE_CONFIG"] = filepath.Join(t.TempDir(), "f.env")
				writeFile(t, env["FLASHSALE_CONFIG"], tt.file)
			}
			s := NewSource(env)
			s.RejectUnknown()
			err := s.Err()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatal("got no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error()+"\n", w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"FLASHSALE_REDIS_ADDR", "FLASHSALE_PG_DSN", "FLASHSALE_QUEUE_GRACE", "FLASHSALE_QUEUE_GRACF"}
	tests := []struct {
		name, in, want string
	}{
		{"one letter swapped", "FLASHSALE_REDIS_ADRR", "FLASHSALE_REDIS_ADDR"},
		{"prefix missing", "PG_DSN", "FLASHSALE_PG_DSN"},
		{"lower case is far", "flashsale_pg_dsn", ""},
		{"nothing close", "FLASHSALE_COLOUR", ""},
		{"two equally close", "FLASHSALE_QUEUE_GRACX", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := suggest(tt.in, cands)
			want := ""
			if tt.want != "" {
				want = fmt.Sprintf(" (did you mean %s?)", tt.want)
			}
			if got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestEnviron(t *testing.T) {
	got := Environ([]string{"A=1", "EMPTY=", "B=x=y", "=odd"})
	if d := cmp.Diff(Vars{"A": "1", "EMPTY": "", "B": "x=y"}, got); d != "" {
		t.Errorf("Environ (-want +got):\n%s", d)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// What a source read, compared with a later read of a changed environment
// and file: a setting changed in either, set to "" where it was unset, or a
// secret file rewritten in place is a change; one nobody asked for is not.
func TestSettingsChanged(t *testing.T) {
	dir := t.TempDir()
	file, key := filepath.Join(dir, "flashsale.env"), filepath.Join(dir, "key")
	load := func(env Vars) Settings {
		s := NewSource(env)
		s.Duration("FLASHSALE_A", time.Second)
		s.String("FLASHSALE_B", "b")
		s.String("FLASHSALE_C", "c")
		s.Secret("FLASHSALE_KEY")
		s.String("FLASHSALE_UNCHANGED", "u")
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		return s.Read()
	}
	writeFile(t, file, "FLASHSALE_A=2s\nFLASHSALE_UNCHANGED=same\nFLASHSALE_NOT_READ=1\n")
	writeFile(t, key, "secret-one")
	before := load(Vars{"FLASHSALE_CONFIG": file, "FLASHSALE_KEY_FILE": key, "FLASHSALE_B": "x"})

	writeFile(t, file, "FLASHSALE_A=3s\nFLASHSALE_UNCHANGED=same\nFLASHSALE_NOT_READ=2\n")
	writeFile(t, key, "secret-two")
	after := load(Vars{"FLASHSALE_CONFIG": file, "FLASHSALE_KEY_FILE": key, "FLASHSALE_B": "x", "FLASHSALE_C": ""})

	want := []string{"FLASHSALE_A", "FLASHSALE_C", "FLASHSALE_KEY"}
	if d := cmp.Diff(want, before.Changed(after)); d != "" {
		t.Errorf("Changed (-want +got):\n%s", d)
	}
	if got := before.Changed(before); len(got) != 0 {
		t.Errorf("a read compared with itself changed %v", got)
	}
	if d := cmp.Diff(want, after.Changed(before)); d != "" {
		t.Errorf("Changed the other way round (-want +got):\n%s", d)
	}
	// Printed whole, as a configuration struct holding them may be.
	if s := fmt.Sprintf("%+v %#v", after, after); strings.Contains(s, "secret-two") || strings.Contains(s, "3s") {
		t.Errorf("the settings print their texts: %s", s)
	}
}
