package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSourcePrecedenceAndErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "flashsale.env")
	secret := filepath.Join(dir, "key")
	os.WriteFile(file, []byte("# comment\nA=from-file\nB=7\nC=1s\n"), 0o600)
	os.WriteFile(secret, []byte("s3cret\n"), 0o600)
	env := map[string]string{"FLASHSALE_CONFIG": file, "A": "from-env", "BAD_INT": "x", "BAD_DUR": "5", "K_FILE": secret}
	s := NewSource(func(k string) string { return env[k] })

	tests := []struct {
		name string
		got  any
		want any
	}{
		{"env beats file", s.String("A", "def"), "from-env"},
		{"file beats default", s.Int("B", 1), 7},
		{"default when unset", s.String("UNSET", "def"), "def"},
		{"duration from file", s.Duration("C", 0), time.Second},
		{"secret from file trimmed", string(s.Secret("K")), "s3cret"},
		{"bad int keeps default", s.Int("BAD_INT", 3), 3},
		{"bad duration keeps default", s.Duration("BAD_DUR", time.Minute), time.Minute},
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
