package sale_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"flashsale/ordersvc/internal/sale"
	"flashsale/ordersvc/internal/store"
	"flashsale/ordersvc/internal/testdb"
	"flashsale/pkg/event"
	"flashsale/pkg/stock"
	"flashsale/tools/testenv"
)

func validSale() store.NewSale {
	start := time.Date(2026, 12, 24, 10, 0, 0, 0, time.UTC)
	return store.NewSale{Name: "xmas", StartsAt: start, EndsAt: start.Add(time.Hour), PaymentTTL: 10 * time.Minute,
		Items: []store.NewItem{{ProductID: "p1", Name: "phone", Price: "199.99", Quantity: 100}}}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*store.NewSale)
		wantIn []string // substrings of the error; none means valid
	}{
		{"valid", func(*store.NewSale) {}, nil},
		{"zero quantity is a valid item", func(s *store.NewSale) { s.Items[0].Quantity = 0 }, nil},
		{"integer price", func(s *store.NewSale) { s.Items[0].Price = "5" }, nil},
		{"empty name", func(s *store.NewSale) { s.Name = "" }, []string{"name"}},
		{"name too long", func(s *store.NewSale) { s.Name = strings.Repeat("x", 201) }, []string{"name"}},
		{"ends before it starts", func(s *store.NewSale) { s.EndsAt = s.StartsAt }, []string{"endsAt"}},
		// PostgreSQL keeps microseconds: this window was 0 there, and its
		// check failed as a 503.
		{"ends within the microsecond it starts", func(s *store.NewSale) {
			s.StartsAt = s.StartsAt.Truncate(time.Microsecond).Add(100 * time.Nanosecond)
			s.EndsAt = s.StartsAt.Add(800 * time.Nanosecond)
		}, []string{"endsAt"}},
		// Stored, then every answer that showed it failed with 500: JSON
		// has no year 10000, which this time zone reaches.
		{"ends in the year 10000 in UTC", func(s *store.NewSale) {
			s.EndsAt = time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("", -(23*3600+59*60)))
		}, []string{"endsAt: want a time between"}},
		{"starts before the year 1 in UTC", func(s *store.NewSale) {
			s.StartsAt = time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("", 23*3600))
		}, []string{"startsAt: want a time between"}},
		{"lasts longer than a year", func(s *store.NewSale) { s.EndsAt = s.StartsAt.Add(sale.MaxSaleLength + time.Second) }, []string{"endsAt: a sale lasts at most"}},
		{"lasts a year", func(s *store.NewSale) { s.EndsAt = s.StartsAt.Add(sale.MaxSaleLength) }, nil},
		{"no payment ttl", func(s *store.NewSale) { s.PaymentTTL = 0 }, []string{"paymentTtl"}},
		{"no items", func(s *store.NewSale) { s.Items = nil }, []string{"items"}},
		{"three decimals", func(s *store.NewSale) { s.Items[0].Price = "1.999" }, []string{"items[0].price"}},
		{"negative price", func(s *store.NewSale) { s.Items[0].Price = "-1" }, []string{"items[0].price"}},
		{"float notation", func(s *store.NewSale) { s.Items[0].Price = "1e3" }, []string{"items[0].price"}},
		{"negative quantity", func(s *store.NewSale) { s.Items[0].Quantity = -1 }, []string{"items[0].quantity"}},
		{"quantity beyond the column", func(s *store.NewSale) { s.Items[0].Quantity = 1 << 31 }, []string{"items[0].quantity"}},
		{"NUL in a name", func(s *store.NewSale) { s.Items[0].Name = "a\x00b" }, []string{"items[0].name"}},
		{"every problem at once", func(s *store.NewSale) { s.Name = ""; s.PaymentTTL = 0; s.Items[0].Price = "x" },
			[]string{"name", "paymentTtl", "items[0].price"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := validSale()
			tt.edit(&ns)
			err := sale.Validate(ns)
			if len(tt.wantIn) == 0 {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, sale.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
	}
}

func TestParseItem(t *testing.T) {
	tests := []struct {
		spec    string
		want    store.NewItem
		wantErr bool
	}{
		{"phone:199.99:100", store.NewItem{ProductID: "phone", Name: "phone", Price: "199.99", Quantity: 100}, false},
		{"phone:199.99:100:sku:1", store.NewItem{ProductID: "sku:1", Name: "phone", Price: "199.99", Quantity: 100}, false},
		{"phone:199.99", store.NewItem{}, true},
		{"phone:1:many", store.NewItem{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := sale.ParseItem(tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStart(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"+30s", now.Add(30 * time.Second), false},
		{"2026-12-24T10:00:00Z", time.Date(2026, 12, 24, 10, 0, 0, 0, time.UTC), false},
		{"+-5s", time.Time{}, true},
		{"tomorrow", time.Time{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := sale.ParseStart(tt.in, now)
			if (err != nil) != tt.wantErr || !got.Equal(tt.want) {
				t.Errorf("got %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestDecodeCreate(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    string // price of the first item when valid
		wantErr bool
	}{
		{"number price", `{"name":"s","startsAt":"2026-12-24T10:00:00Z","endsAt":"2026-12-24T11:00:00Z","paymentTtlSeconds":600,"items":[{"productId":"p","name":"n","price":19.99,"quantity":3}]}`, "19.99", false},
		{"string price", `{"name":"s","startsAt":"2026-12-24T10:00:00Z","endsAt":"2026-12-24T11:00:00Z","paymentTtlSeconds":600,"items":[{"productId":"p","name":"n","price":"19.99","quantity":3}]}`, "19.99", false},
		{"unknown field", `{"name":"s","bogus":1}`, "", true},
		{"huge ttl", `{"name":"s","startsAt":"2026-12-24T10:00:00Z","endsAt":"2026-12-24T11:00:00Z","paymentTtlSeconds":9223372036854775807,"items":[{"name":"n","price":1,"quantity":3}]}`, "", true},
		{"trailing data", `{"name":"s"} {}`, "", true},
		{"not json", `nope`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, err := sale.DecodeCreate([]byte(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, sale.ErrInvalid) {
				t.Errorf("got %v, want ErrInvalid", err)
			}
			if err == nil && ns.Items[0].Price != tt.want {
				t.Errorf("price: got %q, want %q", ns.Items[0].Price, tt.want)
			}
		})
	}
}

func FuzzDecodeCreate(f *testing.F) {
	f.Add([]byte(`{"name":"s","startsAt":"2026-12-24T10:00:00Z","endsAt":"2026-12-24T11:00:00Z","paymentTtlSeconds":600,"items":[{"productId":"p","name":"n","price":19.99,"quantity":3}]}`))
	f.Add([]byte(`{"items":[{"price":"1e400"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ns, err := sale.DecodeCreate(b)
		if err != nil {
			if !errors.Is(err, sale.ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if err := sale.Validate(ns); err != nil {
			t.Fatalf("decoded sale does not validate: %v", err)
		}
	})
}

func FuzzParseItem(f *testing.F) {
	f.Add("phone:199.99:100:sku")
	f.Fuzz(func(t *testing.T, spec string) {
		it, err := sale.ParseItem(spec)
		if err != nil {
			if !errors.Is(err, sale.ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if strings.Contains(it.Name, ":") {
			t.Fatalf("name %q holds a colon", it.Name)
		}
	})
}

// Loading twice gives quantity minus active orders, never twice that: the
// load sets the numbers, it does not add them. The sale is open, so the
// second load is refused unless forced (TestLoadStockRefusedWhileLive).
func TestLoadStockTwice(t *testing.T) {
	t.Parallel()
	testenv.Require(t, testenv.RedisAddr())
	ctx := testenv.Context(t)
	pool := testdb.Pool(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	st, stk := store.New(pool), stock.New(rc)
	svc := sale.NewService(st, stk)
	s := testdb.Sale(t, st, 5, 3)
	// Two active orders on item 0 (u2's paid: it counts as pending
	// does), one rejected (not active) on item 1.
	placed := time.Now()
	evs := []event.OrderPlaced{
		{Version: 1, OrderID: uuid.New(), SaleID: s.ID, ItemID: s.Items[0].ID, UserID: "u1", PlacedAt: placed},
		{Version: 1, OrderID: uuid.New(), SaleID: s.ID, ItemID: s.Items[0].ID, UserID: "u2", PlacedAt: placed},
		{Version: 1, OrderID: uuid.New(), SaleID: s.ID, ItemID: s.Items[1].ID, UserID: "u1", PlacedAt: placed}, // ALREADY_ACTIVE
	}
	if _, err := st.PersistBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pay(ctx, evs[1].OrderID, "u2", "pay-"+evs[1].OrderID.String()); err != nil {
		t.Fatal(err)
	}
	want := sale.LoadResult{SaleID: s.ID, Holders: 2, Items: []sale.LoadedItem{{ItemID: s.Items[0].ID, Left: 3}, {ItemID: s.Items[1].ID, Left: 3}}}
	wantHolders := map[string]string{"u1": evs[0].OrderID.String(), "u2": evs[1].OrderID.String()}
	for run := 1; run <= 2; run++ {
		got, err := svc.LoadStock(ctx, s.ID, run == 2)
		if err != nil {
			t.Fatalf("load %d: %v", run, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("load %d result (-want +got):\n%s", run, diff)
		}
		for _, it := range want.Items {
			left, err := stk.Left(ctx, s.ID, it.ItemID)
			if err != nil || left != it.Left {
				t.Errorf("load %d: Redis stock of item %d: got %d, %v; want %d", run, it.ItemID, left, err, it.Left)
			}
		}
		holders, err := stk.Holders(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantHolders, holders); diff != "" {
			t.Errorf("load %d holders (-want +got):\n%s", run, diff)
		}
	}
	v, err := svc.Describe(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if *v.Items[0].Left != 3 || v.Items[0].Sold != 2 || !*v.Items[0].StockLoaded || *v.Holders != 2 {
		t.Errorf("describe: left %d sold %d loaded %v holders %d, want 3 2 true 2", *v.Items[0].Left, v.Items[0].Sold, *v.Items[0].StockLoaded, *v.Holders)
	}
	if _, err := svc.LoadStock(ctx, 1<<62, false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("load of an unknown sale: got %v, want ErrNotFound", err)
	}
}

// A load of an open sale whose stock is in Redis would set the numbers from
// PostgreSQL and drop the reservations still on their way through Kafka:
// their shoppers could buy again and their units be sold twice. It is
// refused and changes nothing; before the opening a load runs again freely.
func TestLoadStockRefusedWhileLive(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	st, rc := storeAndRedis(t)
	stk := stock.New(rc)
	svc := sale.NewService(st, stk)

	open := testdb.Sale(t, st, 5)
	item := open.Items[0].ID
	if _, err := svc.LoadStock(ctx, open.ID, false); err != nil {
		t.Fatalf("first load of an open sale: %v", err)
	}
	// A reservation in flight: in Redis, not yet in PostgreSQL.
	inFlight := uuid.NewString()
	if _, err := stk.Reserve(ctx, open.ID, item, "u-in-flight", inFlight); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.LoadStock(ctx, open.ID, false); !errors.Is(err, sale.ErrLive) {
		t.Fatalf("second load of an open sale: got %v, want ErrLive", err)
	}
	if left, err := stk.Left(ctx, open.ID, item); err != nil || left != 4 {
		t.Errorf("stock after the refused load: got %d, %v; want 4", left, err)
	}
	holders, err := stk.Holders(ctx, open.ID)
	if err != nil {
		t.Fatal(err)
	}
	if holders["u-in-flight"] != inFlight {
		t.Errorf("the refused load dropped the reservation in flight: holders %v", holders)
	}
	// The stock key lost (a sharded item's lost shard reads the same), the
	// holder still there: reservations are in flight all the same.
	if err := rc.Do(ctx, rc.B().Del().Key(stock.StockKey(open.ID, item)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.LoadStock(ctx, open.ID, false); !errors.Is(err, sale.ErrLive) {
		t.Fatalf("load of an open sale whose stock key is gone but a shopper holds a unit: got %v, want ErrLive", err)
	}
	// Forced, it loads PostgreSQL's numbers (and drops it): what the
	// operator asked for.
	if _, err := svc.LoadStock(ctx, open.ID, true); err != nil {
		t.Fatalf("forced load: %v", err)
	}
	if left, err := stk.Left(ctx, open.ID, item); err != nil || left != 5 {
		t.Errorf("stock after the forced load: got %d, %v; want 5", left, err)
	}

	now := time.Now()
	later, err := st.CreateSale(ctx, store.NewSale{
		Name: fmt.Sprintf("%s-upcoming-%d", t.Name(), now.UnixNano()), StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour),
		PaymentTTL: 10 * time.Minute, Items: []store.NewItem{{ProductID: "p", Name: "n", Price: "1.00", Quantity: 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		if _, err := svc.LoadStock(ctx, later.ID, false); err != nil {
			t.Errorf("load %d of a sale not open yet: %v", run, err)
		}
	}
}

func TestDecodeCreateQueueSettings(t *testing.T) {
	base := `{"name":"s","startsAt":"2026-12-24T10:00:00Z","endsAt":"2026-12-24T11:00:00Z","paymentTtlSeconds":600,"items":[{"name":"n","price":1,"quantity":3}]`
	tests := []struct {
		name    string
		body    string
		want    store.Queue
		wantErr bool
	}{
		{"no queue: none", base + `}`, store.DefaultQueue, false},
		{"queued sale", base + `,"queue":{"enabled":true,"draw":false,"admissionRate":250,"powDifficulty":12}}`, store.Queue{Enabled: true, AdmissionRate: 250, PowDifficulty: 12}, false},
		// What a queue object names goes over the defaults: {"enabled":
		// true} alone made a sale admitting nobody (rate 0), with no draw.
		{"a partial queue keeps the defaults it does not name", base + `,"queue":{"enabled":true}}`, store.Queue{Enabled: true, Draw: true, AdmissionRate: 100}, false},
		{"a null queue: none", base + `,"queue":null}`, store.DefaultQueue, false},
		{"proof of work too hard", base + `,"queue":{"enabled":true,"powDifficulty":40}}`, store.Queue{}, true},
		{"negative rate", base + `,"queue":{"enabled":true,"admissionRate":-1}}`, store.Queue{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, err := sale.DecodeCreate([]byte(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("DecodeCreate() error = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && ns.Queue != tt.want {
				t.Fatalf("queue = %+v, want %+v", ns.Queue, tt.want)
			}
		})
	}
}

// An admission buys once, also after a Redis loss: a load from PostgreSQL
// puts back in the sale's spent set the admissions its orders were placed
// with, active or ended, and not those of orders that never existed (a
// rejected one's admission went back with its unit).
func TestLoadStockPutsBackSpentAdmissions(t *testing.T) {
	t.Parallel()
	ctx, st, rc, stk, sl := loadedSale(t, 5)
	svc := sale.NewService(st, stk)
	item := sl.Items[0].ID
	ev := func(user, admission string) event.OrderPlaced {
		return event.OrderPlaced{Version: event.Version, OrderID: uuid.New(), SaleID: sl.ID, ItemID: item,
			UserID: user, PlacedAt: time.Now(), AdmissionID: admission}
	}
	evs := []event.OrderPlaced{ev("holding", "t-holding"), ev("cancelled", "t-cancelled"),
		ev("holding", "t-rejected"), ev("unqueued", "")} // the third: ALREADY_ACTIVE, rejected
	if _, err := st.PersistBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Cancel(ctx, evs[1].OrderID, "cancelled"); err != nil {
		t.Fatal(err)
	}
	// The sale's copy in Redis lost, spent admissions and all.
	if _, err := testenv.DeleteKeys(ctx, rc, fmt.Sprintf("{fs:%d}*", sl.ID)); err != nil {
		t.Fatal(err)
	}
	res, err := svc.LoadStock(ctx, sl.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.SpentAdmissions != 2 || res.Holders != 2 {
		t.Errorf("load: %d spent admissions and %d holders put back, want 2 and 2", res.SpentAdmissions, res.Holders)
	}
	for _, c := range []struct {
		user, admission string
		spent           bool
	}{{"holding", "t-holding", true}, {"cancelled", "t-cancelled", true}, {"holding", "t-rejected", false}} {
		spent, _, err := stk.AdmissionSpent(ctx, sl.ID, c.user, c.admission)
		if err != nil || spent != c.spent {
			t.Errorf("%s's admission %s spent: %v (%v), want %v", c.user, c.admission, spent, err, c.spent)
		}
	}
	// Her order cancelled, the shopper holds nothing: only her spent
	// admission stops a second purchase with it.
	if _, err := stk.ReserveAdmitted(ctx, sl.ID, item, "cancelled", uuid.NewString(), "t-cancelled"); !errors.Is(err, stock.ErrTokenSpent) {
		t.Errorf("a purchase with the cancelled order's admission after the load: %v, want ErrTokenSpent", err)
	}
}
