package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"flashsale/ordersvc/internal/api"
	"flashsale/ordersvc/internal/lag"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

// lagReader reads the lag of a topic and group of the test's own, after
// producing n messages to it that nobody consumes.
func lagReader(t *testing.T, n int) *lag.Reader {
	t.Helper()
	testenv.Require(t, testenv.KafkaBrokers())
	name := "test-api-lag-" + uuid.NewString()[:8]
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": testenv.KafkaBrokers(), "acks": "all", "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reports := make(chan kafka.Event, n)
	for i := range n {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &name, Partition: kafka.PartitionAny},
			Key: []byte(fmt.Sprint(i)), Value: []byte("x")}, reports); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if m := (<-reports).(*kafka.Message); m.TopicPartition.Error != nil {
			t.Fatal(m.TopicPartition.Error)
		}
	}
	r, err := lag.New(lag.Config{Brokers: testenv.KafkaBrokers(), Topic: name, Group: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// statusBody is the contract of GET /admin/sales/{id}/status, decoded
// strictly so a renamed field fails the test.
type statusBody struct {
	SaleID         int64            `json:"saleId"`
	OrdersByStatus map[string]int64 `json:"ordersByStatus"`
	Items          []struct {
		ItemID         int64            `json:"itemId"`
		OrdersByStatus map[string]int64 `json:"ordersByStatus"`
	} `json:"items"`
	ConsumerLag struct {
		Total      int64 `json:"total"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Committed int64 `json:"committed"`
			End       int64 `json:"end"`
			Lag       int64 `json:"lag"`
		} `json:"partitions"`
		Error string `json:"error"`
	} `json:"consumerLag"`
	Reconcile *struct {
		At       time.Time `json:"at"`
		Verdict  string    `json:"verdict"`
		Repaired bool      `json:"repaired"`
		Summary  string    `json:"summary"`
	} `json:"reconcile"`
}

func decodeStatus(t *testing.T, raw string) statusBody {
	t.Helper()
	var b statusBody
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("status body %s: %v", raw, err)
	}
	return b
}

func counts(pending, paid, expired, cancelled, rejected int64) map[string]int64 {
	return map[string]int64{"PENDING": pending, "PAID": paid, "EXPIRED": expired, "CANCELLED": cancelled, "REJECTED": rejected}
}

// The status endpoint counts a sale's orders in every state, overall and
// per item (every key present, zeros included), with the consumer lag and
// the last reconcile verdict of this process.
func TestAdminSaleStatus(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	rc := redisClient(t)
	st, stk := store.New(pool), stock.New(rc)
	ctx := testenv.Context(t)
	tracker := lag.NewTracker(lagReader(t, 3), nil)
	svc := sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithLagTracker(tracker))
	c := serve(t, api.NewAdmin(svc, adminToken, api.NewHealth(st, metrics.New(), nil), nil, quiet).Handler(context.Background()))
	bearer := "Bearer " + string(adminToken)

	s := testdb.Sale(t, st, 5, 3, 2)
	testdb.Load(t, st, stk, s.ID)
	path := fmt.Sprintf("/admin/sales/%d/status", s.ID)

	// Nothing yet: every key at zero, the lag not read yet, no verdict.
	r := do(t, c, "GET", path, bearer, "")
	if r.status != 200 {
		t.Fatalf("status of a new sale: %d %s", r.status, r.raw)
	}
	b := decodeStatus(t, r.raw)
	if diff := cmp.Diff(counts(0, 0, 0, 0, 0), b.OrdersByStatus); diff != "" || len(b.Items) != 3 || b.Reconcile != nil ||
		b.ConsumerLag.Error == "" || b.ConsumerLag.Partitions == nil {
		t.Errorf("status of a new sale (-want +got counts):\n%s\n%s", diff, r.raw)
	}

	// Item 0: alice pays, bob cancels, carol stays PENDING. Item 1: dave's
	// order expires; erin holds one, and her second order is REJECTED
	// (ALREADY_ACTIVE). Item 2: nothing.
	evs := testdb.Orders(t, st, stk, s, 0, time.Now(), "alice", "bob", "carol")
	if _, err := st.Pay(ctx, evs[0].OrderID, "alice", "status-"+uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, evs[1].OrderID, "bob"); err != nil {
		t.Fatal(err)
	}
	testdb.Orders(t, st, stk, s, 1, time.Now().Add(-11*time.Minute), "dave")
	for {
		res, err := st.ExpireDue(ctx, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.IDs) == 0 {
			break
		}
	}
	testdb.Orders(t, st, stk, s, 1, time.Now(), "erin")
	out, err := st.PersistBatch(ctx, []event.OrderPlaced{{Version: event.Version, OrderID: uuid.New(), SaleID: s.ID,
		ItemID: s.Items[1].ID, UserID: "erin", PlacedAt: time.Now()}})
	if err != nil || out[0].Kind != store.Rejected {
		t.Fatalf("erin's second order: %+v %v, want rejected", out, err)
	}

	tracker.Refresh(ctx)
	if code := do(t, c, "POST", fmt.Sprintf("/admin/sales/%d/reconcile", s.ID), bearer, "").status; code != 200 {
		t.Fatalf("reconcile: %d", code)
	}
	r = do(t, c, "GET", path, bearer, "")
	if r.status != 200 {
		t.Fatalf("status: %d %s", r.status, r.raw)
	}
	b = decodeStatus(t, r.raw)
	if diff := cmp.Diff(counts(2, 1, 1, 1, 1), b.OrdersByStatus); diff != "" {
		t.Errorf("orders by status (-want +got):\n%s", diff)
	}
	wantItems := []map[string]int64{counts(1, 1, 0, 1, 0), counts(1, 0, 1, 0, 1), counts(0, 0, 0, 0, 0)}
	for i, it := range b.Items {
		if it.ItemID != s.Items[i].ID {
			t.Errorf("item %d: id %d, want %d", i, it.ItemID, s.Items[i].ID)
		}
		if diff := cmp.Diff(wantItems[i], it.OrdersByStatus); diff != "" {
			t.Errorf("item %d by status (-want +got):\n%s", i, diff)
		}
	}
	var parts int64
	for _, p := range b.ConsumerLag.Partitions {
		if p.Committed != -1 || p.Lag != p.End {
			t.Errorf("partition %+v: want nothing committed and all of it lagging", p)
		}
		parts += p.Lag
	}
	if b.ConsumerLag.Total != 3 || parts != 3 || b.ConsumerLag.Error != "" {
		t.Errorf("consumer lag: %+v, want 3 over the partitions and no error", b.ConsumerLag)
	}
	if b.Reconcile == nil || b.Reconcile.Verdict != sale.VerdictOK || b.Reconcile.Repaired || b.Reconcile.Summary == "" ||
		time.Since(b.Reconcile.At) > time.Minute {
		t.Errorf("reconcile verdict: %+v, want a recent OK", b.Reconcile)
	}

	for _, tt := range []struct {
		name, path, authz string
		want              int
		wantErr           string
	}{
		{"unknown sale", "/admin/sales/999999999999/status", bearer, 404, api.CodeNotFound},
		{"bad sale id", "/admin/sales/x/status", bearer, 400, api.CodeBadRequest},
		{"no token", path, "", 401, api.CodeUnauthorized},
		{"shopper token", path, token(t, "alice"), 401, api.CodeUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, c, "GET", tt.path, tt.authz, "")
			if r.status != tt.want || r.body["error"] != tt.wantErr {
				t.Errorf("got %d %s, want %d %s", r.status, r.raw, tt.want, tt.wantErr)
			}
		})
	}
}

// A repair and load-stock refuse to compute stock while the consumer group
// has not committed the orders topic's end: 409 CONSUMER_LAGGING with the
// lag, Redis untouched, and the verdict LAGGING on the status endpoint.
func TestAdminConsumerLagging(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	rc := redisClient(t)
	st, stk := store.New(pool), stock.New(rc)
	ctx := testenv.Context(t)
	svc := sale.NewService(st, stk, sale.WithAcceptedRecords(rc), sale.WithCatchUp(lagReader(t, 4), 200*time.Millisecond))
	c := serve(t, api.NewAdmin(svc, adminToken, api.NewHealth(st, metrics.New(), nil), nil, quiet).Handler(context.Background()))
	bearer := "Bearer " + string(adminToken)
	s := testdb.Sale(t, st, 4)
	testdb.Load(t, st, stk, s.ID)
	testdb.Orders(t, st, stk, s, 0, time.Now(), "alice")
	if err := rc.Do(ctx, rc.B().Del().Key(stock.StockKey(s.ID, s.Items[0].ID)).Build()).Error(); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{"/reconcile?repair=true", "/load-stock"} {
		r := do(t, c, "POST", fmt.Sprintf("/admin/sales/%d%s", s.ID, p), bearer, "")
		l, _ := r.body["lag"].(map[string]any)
		if r.status != 409 || r.body["error"] != api.CodeConsumerLagging || r.header["Retry-After"] == "" || l == nil || l["total"] != float64(4) {
			t.Errorf("%s while the consumer lags: got %d %s (Retry-After %q), want 409 CONSUMER_LAGGING with lag total 4",
				p, r.status, r.raw, r.header["Retry-After"])
		}
		if _, err := stk.Left(ctx, s.ID, s.Items[0].ID); err == nil {
			t.Errorf("%s wrote the stock although the consumer lags", p)
		}
	}
	b := decodeStatus(t, do(t, c, "GET", fmt.Sprintf("/admin/sales/%d/status", s.ID), bearer, "").raw)
	if b.Reconcile == nil || b.Reconcile.Verdict != sale.VerdictLagging {
		t.Errorf("verdict after the refused repair: %+v, want LAGGING", b.Reconcile)
	}
	// A read-only reconcile does not wait: it reports the lost key.
	if r := do(t, c, "POST", fmt.Sprintf("/admin/sales/%d/reconcile", s.ID), bearer, ""); r.status != 200 || r.body["clean"] != false {
		t.Errorf("read-only reconcile while the consumer lags: %d %s", r.status, r.raw)
	}
}
