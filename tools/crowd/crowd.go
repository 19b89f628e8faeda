// Package crowd is the load test's population: N distinct shoppers, each with
// a bearer token minted from the configured key, and the vegeta targeter that
// sends each shopper's purchase once, in order.
package crowd

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"golang.org/x/sync/errgroup"

	"flashsale/pkg/auth"
)

// Crowd is a set of shoppers with their tokens.
type Crowd struct {
	Users  []string
	Tokens []string
}

// UserID names shopper i of a run; the prefix keeps runs apart in one database.
func UserID(prefix string, i int) string { return prefix + "-" + strconv.Itoa(i) }

// Mint creates n shoppers, minting their tokens on every core before the
// attack so that signing does not compete with the gateway during it.
func Mint(key []byte, issuer, prefix string, n int, ttl time.Duration) (*Crowd, error) {
	if n <= 0 {
		return nil, fmt.Errorf("mint crowd: %d shoppers", n)
	}
	c := &Crowd{Users: make([]string, n), Tokens: make([]string, n)}
	now := time.Now()
	var g errgroup.Group
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		g.Go(func() error {
			for i := w; i < n; i += workers {
				c.Users[i] = UserID(prefix, i)
				tok, err := auth.MintHS256(key, c.Users[i], issuer, "", ttl, now)
				if err != nil {
					return err
				}
				c.Tokens[i] = tok
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("mint crowd: %w", err)
	}
	return c, nil
}

// ShopperParam is the query parameter that carries the shopper index in each
// request URL, so a result can be tied back to its shopper. The gateway
// ignores it.
const ShopperParam = "shopper"

// Targeter returns a vegeta targeter that sends shopper 0, 1, 2, ... once
// each, spreading them over the items round-robin. After the last shopper
// it answers vegeta.ErrNoTargets; bound the attack with a pacer too (Limit).
// purchasePath is e.g. /api/flash-sales/7/g/<gate>.
func (c *Crowd) Targeter(baseURL, purchasePath string, items []int64) vegeta.Targeter {
	var next atomic.Int64
	urls := make([]string, len(items))
	for i, it := range items {
		urls[i] = strings.TrimRight(baseURL, "/") + purchasePath + "/items/" + strconv.FormatInt(it, 10) + "/purchase?" + ShopperParam + "="
	}
	return func(t *vegeta.Target) error {
		i := int(next.Add(1) - 1)
		if i >= len(c.Tokens) {
			return vegeta.ErrNoTargets
		}
		t.Method = http.MethodPost
		t.URL = urls[i%len(urls)] + strconv.Itoa(i)
		t.Body = nil
		t.Header = http.Header{"Authorization": []string{"Bearer " + c.Tokens[i]}, "X-Forwarded-For": []string{ShopperIP(i)}}
		return nil
	}
}

// ShopperIP is the client address shopper i appears to come from, as a
// load balancer in front of the gateway would report it in
// X-Forwarded-For (the gateway believes it only from trusted proxies). It is
// a header value only: no traffic goes to it.
func ShopperIP(i int) string {
	return "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
}

// ShopperOf reads the shopper index back from a result URL.
func ShopperOf(url string) (int, error) {
	_, v, ok := strings.Cut(url, "?"+ShopperParam+"=")
	if !ok {
		return 0, errors.New("crowd: no shopper in URL")
	}
	return strconv.Atoi(v)
}

// Limit wraps a pacer so that the attack stops by itself after n hits.
func Limit(p vegeta.Pacer, n uint64) vegeta.Pacer { return limited{p, n} }

type limited struct {
	vegeta.Pacer
	n uint64
}

func (l limited) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= l.n {
		return 0, true
	}
	return l.Pacer.Pace(elapsed, hits)
}
