package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// No rendering of a Secret, alone or inside a struct, shows its bytes.
func TestNeverPrints(t *testing.T) {
	const value = "hunter2-very-secret"
	s := Secret(value)
	holder := struct {
		Name  string
		Token Secret
	}{"admin", s}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "token", s, "holder", holder)
	var textLogged bytes.Buffer
	slog.New(slog.NewTextHandler(&textLogged, nil)).Info("config", "token", s)
	js, err := json.Marshal(holder)
	if err != nil {
		t.Fatal(err)
	}
	renderings := map[string]string{
		"%s": fmt.Sprintf("%s", s), "%v": fmt.Sprintf("%v", s), "%+v": fmt.Sprintf("%+v", holder),
		"%#v": fmt.Sprintf("%#v", holder), "%x": fmt.Sprintf("%x", s), "%q": fmt.Sprintf("%q", s),
		"%d": fmt.Sprintf("%d", s), "Sprint": fmt.Sprint(s), "json": string(js),
		"slog json": logged.String(), "slog text": textLogged.String(),
	}
	for how, got := range renderings {
		if strings.Contains(got, value) || strings.Contains(got, fmt.Sprintf("%x", value)) || strings.Contains(got, "104 117") {
			t.Errorf("%s shows the secret: %s", how, got)
		}
		if !strings.Contains(got, Redacted) {
			t.Errorf("%s does not say %s: %s", how, Redacted, got)
		}
	}
	if string(s) != value || !s.Set() || Secret(nil).Set() {
		t.Error("the value itself must stay reachable by conversion")
	}
}
