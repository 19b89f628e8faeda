package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"flashsale/pkg/stock"
	"flashsale/tools/harness"
	"flashsale/tools/testenv"
)

// A gateway killed between the reserve and the publish leaves units
// reserved in Redis for purchases nobody was answered and no order will
// ever back. The order service gives them back by itself once they are
// older than its in-flight window (within window + interval, plus the
// consumer catch-up check), the restarted gateway's sold-out flag clears,
// the sale then sells out exactly, and the audit passes.
//
// The kill falls deterministically between reserve and publish: the
// gateway's broker address is a closed port, its publish timeout long and
// failing fast off (it would refuse at once on librdkafka's all-brokers-down
// and give the units back), so every purchase waits in the publish step,
// its unit reserved, until the SIGKILL.
func TestDeadGatewayReservationsComeBack(t *testing.T) {
	const (
		units    = 5
		window   = 8 * time.Second
		interval = time.Second
		// slack covers the pass itself: the consumer-lag read, the
		// PostgreSQL statement, the relay's release.
		slack = 5 * time.Second
	)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	s := harness.Start(t, harness.Options{
		// Unpaced: on a development stack the pass also reads every sale in
		// play earlier demos left (open, or ended within its payment
		// window), at 20,000 holders a second by default, which would put
		// this sale's release beyond the bound below.
		Env: map[string]string{"FLASHSALE_INFLIGHT_WINDOW": window.String(), "FLASHSALE_ABANDON_INTERVAL": interval.String(),
			"FLASHSALE_ABANDON_READ_RATE": "0"},
		ProcEnv: map[string]map[string]string{"gateway": {
			"FLASHSALE_KAFKA_BROKERS": deadAddr, "FLASHSALE_PUBLISH_TIMEOUT": "120s", "FLASHSALE_PUBLISH_FAIL_FAST_AFTER": "0"}},
	})
	ctx := testenv.Context(t)
	saleID, itemID, path := openSale(t, s, units)
	url := fmt.Sprintf("%s%s/items/%d/purchase", s.GatewayURL, path, itemID)
	rc := testenv.RedisClient(t, testenv.RedisAddr())
	st := stock.New(rc)

	// Every unit reserved, every purchase stuck in its publish.
	var wg sync.WaitGroup
	for i := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The answer never comes: the gateway dies with the request.
			_, _, _, _ = harness.Do(ctx, "POST", url, token(t, fmt.Sprintf("stuck-%d", i)), nil)
		}()
	}
	var reservedAt time.Time
	for deadline := time.Now().Add(15 * time.Second); ; {
		h, err := st.Holders(ctx, saleID)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) == units {
			reservedAt = time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d units reserved after 15s", len(h), units)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Kill("gateway")
	wg.Wait()
	if left, err := st.Left(ctx, saleID, itemID); err != nil || left != 0 {
		t.Fatalf("after the kill: %d left (%v), want 0 (every unit held by a dead purchase)", left, err)
	}
	s.SetProcEnv("gateway", nil) // back with the real broker
	s.Restart("gateway")

	// Within the window the units stay held: the restarted gateway sells
	// nothing and learns SOLD_OUT (its flag is set).
	buy := func(user string) (int, string) {
		code, body, _, err := harness.Do(ctx, "POST", url, token(t, user), nil)
		if err != nil {
			t.Fatalf("purchase of %s: %v", user, err)
		}
		var a struct{ OrderID string }
		_ = json.Unmarshal(body, &a)
		return code, a.OrderID
	}
	if code, _ := buy("early"); code != http.StatusGone {
		if time.Since(reservedAt) < window {
			t.Fatalf("a purchase %v after the reservations, inside the %v window: %d, want 410", time.Since(reservedAt), window, code)
		}
		t.Logf("the restart took past the window (%v): the within-window check is skipped", time.Since(reservedAt))
	}

	// Back on sale by themselves, within the bound.
	bound := window + interval + slack
	var back time.Duration
	for {
		left, err := st.Left(ctx, saleID, itemID)
		if err != nil {
			t.Fatal(err)
		}
		back = time.Since(reservedAt)
		if left == units {
			break
		}
		if back > 2*bound {
			t.Fatalf("%d of %d units back %v after the reservations; ordersvc log:\n%s", left, units, back, s.Log("ordersvc"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if back > bound {
		t.Errorf("units back %v after the reservations, want within window %v + interval %v + %v", back, window, interval, slack)
	}
	t.Logf("%d units back %v after they were reserved (window %v, interval %v)", units, back.Round(100*time.Millisecond), window, interval)

	// The dead purchases' shoppers hold nothing: no order to find.
	for i := range units {
		code, body, _, err := harness.Do(ctx, "GET", fmt.Sprintf("%s/api/flash-sales/%d/order", s.GatewayURL, saleID), token(t, fmt.Sprintf("stuck-%d", i)), nil)
		if err != nil || code != http.StatusNotFound {
			t.Errorf("my order of stuck-%d after the release: %d %s %v, want 404", i, code, body, err)
		}
	}

	// The gateway's sold-out flag cleared: the sale sells out exactly.
	accepted := map[string]string{}
	for i := 0; ; i++ {
		user := fmt.Sprintf("after-%d", i)
		code, id := buy(user)
		if code == http.StatusAccepted {
			accepted[id] = user
			continue
		}
		if code != http.StatusGone {
			t.Fatalf("purchase %d after the release: %d, want 202 or 410", i, code)
		}
		break
	}
	if len(accepted) != units {
		t.Fatalf("%d sold after the release, want exactly %d", len(accepted), units)
	}

	pool := pgPool(t, ctx)
	sale := &clusterSale{t: t, s: s, saleID: saleID, seeds: testenv.RedisAddr(), accepted: accepted}
	sale.waitPersisted(ctx, pool)
	if v := sale.audit(ctx, pool); !v.OK() {
		t.Fatalf("audit: %s", verdictText(v))
	}
	var abandoned int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM flash_sale_order WHERE sale_id = $1 AND status = 'REJECTED' AND reject_reason = 'RESERVATION_ABANDONED'`,
		saleID).Scan(&abandoned); err != nil || abandoned != units {
		t.Errorf("abandoned rows: %d (%v), want %d", abandoned, err, units)
	}
	// The counter is the process's: it also counts abandoned reservations
	// of other open sales in the shared database.
	if n := metricSum(t, s.AdminURL, "flashsale_ordersvc_reservations_abandoned_released_total"); n < units {
		t.Errorf("flashsale_ordersvc_reservations_abandoned_released_total = %v, want at least %d", n, units)
	}
	if log := s.Log("ordersvc"); !strings.Contains(log, "abandoned reservations released") {
		t.Errorf("ordersvc logged no release of abandoned reservations:\n%s", log)
	}
}
