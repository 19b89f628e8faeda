package crowd

import (
	"errors"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"flashsale/pkg/auth"
)

var key = []byte("crowd-test-key-0123456789abcdef0123456")

func TestMintAndTarget(t *testing.T) {
	c, err := Mint(key, "flashsale", "run1", 7, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := auth.NewVerifier(key, nil, "flashsale", "")
	seen := map[string]bool{}
	for i, tok := range c.Tokens {
		sub, err := v.UserID(tok)
		if err != nil || sub != UserID("run1", i) {
			t.Fatalf("token %d verifies as %q, %v; want %q", i, sub, err, UserID("run1", i))
		}
		seen[sub] = true
	}
	if len(seen) != 7 {
		t.Fatalf("%d distinct shoppers, want 7", len(seen))
	}

	tr := c.Targeter("http://127.0.0.1:8080/", "/api/flash-sales/3/g/abc", []int64{10, 11})
	for i := range 7 {
		var tg vegeta.Target
		if err := tr(&tg); err != nil {
			t.Fatal(err)
		}
		wantItem := []string{"/items/10/", "/items/11/"}[i%2]
		if tg.Method != "POST" || !strings.HasPrefix(tg.URL, "http://127.0.0.1:8080/api/flash-sales/3/g/abc") || !strings.Contains(tg.URL, wantItem) {
			t.Errorf("target %d = %s %s, want POST on %s", i, tg.Method, tg.URL, wantItem)
		}
		if got := tg.Header.Get("Authorization"); got != "Bearer "+c.Tokens[i] {
			t.Errorf("target %d carries another shopper's token", i)
		}
		if n, err := ShopperOf(tg.URL); err != nil || n != i {
			t.Errorf("ShopperOf(%s) = %d, %v; want %d", tg.URL, n, err, i)
		}
	}
	var tg vegeta.Target
	if err := tr(&tg); !errors.Is(err, vegeta.ErrNoTargets) {
		t.Errorf("after the crowd: %v, want ErrNoTargets (each shopper buys once)", err)
	}
}

func TestLimitStopsTheAttack(t *testing.T) {
	p := Limit(vegeta.Rate{Freq: 0}, 3)
	for hits := uint64(0); hits < 3; hits++ {
		if _, stop := p.Pace(0, hits); stop {
			t.Fatalf("stopped after %d hits, want 3", hits)
		}
	}
	if _, stop := p.Pace(0, 3); !stop {
		t.Fatal("did not stop after 3 hits")
	}
}
