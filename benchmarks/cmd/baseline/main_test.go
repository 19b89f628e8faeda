package main

import (
	"context"
	"io"
	"strings"
	"testing"

	pkgconfig "flashsale/pkg/config"
)

func TestRunRefusesABadConfiguration(t *testing.T) {
	err := run(context.Background(), []string{"-design", "nginx", "-pg-conns", "0"},
		pkgconfig.Vars{}, io.Discard)
	if err == nil {
		t.Fatal("run = nil, want the configuration problems")
	}
	for _, want := range []string{"-design"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run = %v, want it to name %q", err, want)
		}
	}
}
