package suite

import (
	"strings"
	"testing"
	"time"

	"flashsale/benchmarks/report"
)

func validOptions() Options {
	return Options{
		GatewayURL: "http://127.0.0.1:18080", AdminURL: "http://localhost:18091", AdminToken: "t",
		JWTKey: []byte("0123456789abcdef0123456789abcdef"), BaselineBin: "baseline",
		Shoppers: 100, Stock: 10, Connections: 8, Workers: 8, Rounds: 1,
		Bound: time.Second, Timeout: time.Second, PGConns: 4, PersistBound: time.Second,
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Options)
		want   []string // substrings of the error; none: valid
	}{
		{"defaults are valid", func(*Options) {}, nil},
		// A flash sale has more shoppers than units.
		{"stock not below shoppers", func(o *Options) { o.Stock = 100 }, []string{"-stock"}},
		// Every attack must stop by itself.
		{"no time bound", func(o *Options) { o.Bound = 0 }, []string{"-bound"}},
		// Only this machine is attacked.
		{"remote gateway", func(o *Options) { o.GatewayURL = "http://10.0.0.1:8080" }, []string{"not loopback"}},
		{"not a URL", func(o *Options) { o.AdminURL = "127.0.0.1:18091" }, []string{"not a URL"}},
		{"unknown step", func(o *Options) { o.Only = []string{"selling/nginx"} }, []string{"-only"}},
		// Every problem at once.
		{"several", func(o *Options) { o.JWTKey = nil; o.Workers = 0; o.Rounds = 0 }, []string{"-jwt-key", "-workers", "-rounds"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := validOptions()
			c.change(&o)
			err := o.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %v", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to name %q", err, w)
				}
			}
		})
	}
}

func TestKibToMiB(t *testing.T) {
	cases := []struct{ in, want string }{
		{"   75776 kB", "74 MiB"},
		{"1024 kB", "1 MiB"},
		{"x kB", ""},
	}
	for _, c := range cases {
		if got := kibToMiB(c.in); got != c.want {
			t.Errorf("kibToMiB(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A sale outlives every attack on it and the wait for its orders, and is
// not left open much longer: every sale in play is a pass over its
// holders for the order service, and an open one is in play for its
// payment window after it ends besides.
func TestSaleLength(t *testing.T) {
	o := validOptions()
	o.Bound, o.PersistBound, o.Rounds = time.Minute, 30*time.Second, 3
	r := &runner{o: o}
	for _, c := range []struct {
		scenario string
		attacks  int
	}{{report.Selling, 1}, {report.SoldOut, 2 * o.Rounds}} {
		got := r.saleLength(c.scenario)
		least := time.Duration(c.attacks)*o.Bound + o.PersistBound
		if got < least || got > least+5*time.Minute {
			t.Errorf("%s: sale open %v, want at least %v (%d attacks and the persist wait) and not much more", c.scenario, got, least, c.attacks)
		}
	}
}
