package redisconn_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"flashsale/pkg/redisconn"
	"flashsale/tools/testenv"
)

func TestAddrs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		wantErr  bool
	}{
		// the single-node setting every deployment had before clusters
		{"one", "127.0.0.1:16379", []string{"127.0.0.1:16379"}, false},
		// a cluster's seed nodes, with the blanks people type
		{"list", " 10.0.0.1:6379 , redis-2:6379,,", []string{"10.0.0.1:6379", "redis-2:6379"}, false},
		{"ipv6", "[::1]:6379", []string{"[::1]:6379"}, false},
		{"empty", " , ", nil, true},
		{"no port", "127.0.0.1", nil, true},
		{"bad port", "127.0.0.1:99999", nil, true},
		{"no host", ":6379", nil, true},
		// one bad entry spoils the list: a half-read seed list hides typos
		{"one bad of two", "127.0.0.1:1,nope", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := redisconn.Addrs(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Addrs(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Addrs(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// The same constructor gives a single-node client for one plain Redis and a
// cluster client for the cluster, and DeleteKeys reaches keys on every
// master.
func TestModeFollowsTheServer(t *testing.T) {
	testenv.Require(t, testenv.RedisAddr())
	single := testenv.RedisClient(t, testenv.RedisAddr())
	if redisconn.IsCluster(single) {
		t.Errorf("client of the single node %s is in cluster mode", testenv.RedisAddr())
	}

	addr := testenv.RequireCluster(t)
	ctx := testenv.Context(t)
	for _, seeds := range []string{addr, strings.Split(addr, ",")[0]} { // the list, or any one seed
		c := testenv.RedisClient(t, seeds)
		if !redisconn.IsCluster(c) {
			t.Fatalf("client of %s is not in cluster mode", seeds)
		}
	}
	c := testenv.RedisClient(t, addr)
	prefix := fmt.Sprintf("redisconn-test-%d", time.Now().UnixNano())
	masters := map[string]bool{}
	const keys = 60
	for i := range keys {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if err := c.Do(ctx, c.B().Set().Key(k).Value("1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		masters[nodeOf(t, ctx, c, k)] = true
	}
	if len(masters) < 2 {
		t.Fatalf("%d keys landed on %d master(s); the cluster is not spreading slots", keys, len(masters))
	}
	n, err := testenv.DeleteKeys(ctx, c, prefix+":*")
	if err != nil {
		t.Fatal(err)
	}
	if n != keys {
		t.Errorf("DeleteKeys removed %d keys, want %d", n, keys)
	}
	for i := range keys {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if left, err := c.Do(ctx, c.B().Exists().Key(k).Build()).AsInt64(); err != nil || left != 0 {
			t.Fatalf("key %s still exists (%d, %v)", k, left, err)
		}
	}
}

func nodeOf(t *testing.T, ctx context.Context, c rueidis.Client, key string) string {
	t.Helper()
	for addr, node := range c.Nodes() {
		n, err := node.Do(ctx, node.B().Exists().Key(key).Build()).AsInt64()
		if err == nil && n == 1 {
			return addr
		}
	}
	t.Fatalf("key %s on no node", key)
	return ""
}

// A connection count maps to the rueidis multiplex that opens exactly that
// many connections (2^multiplex, -1 for one); a count rueidis cannot open
// is refused, not rounded.
func TestMultiplex(t *testing.T) {
	for conns, want := range map[int]int{1: -1, 2: 1, 4: 2, 8: 3, 256: 8} {
		if got, err := redisconn.Multiplex(conns); err != nil || got != want {
			t.Errorf("Multiplex(%d) = %d, %v; want %d", conns, got, err, want)
		}
	}
	for _, conns := range []int{0, -1, 3, 6, 512} {
		if got, err := redisconn.Multiplex(conns); err == nil {
			t.Errorf("Multiplex(%d) = %d, want an error", conns, got)
		}
	}
}

// holdServer keeps the Redis server busy for about ms milliseconds (one
// script, which no other client's command can interleave with).
const holdServer = `local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat
  local n = redis.call('TIME')
  t = n[1] * 1000000 + n[2]
until t - start > tonumber(ARGV[1]) * 1000
return 1`

// A command whose deadline runs out fails alone: the command queued on the
// same connection behind it still gets its answer. This is the gateway's
// case of a purchase whose Redis timeout expires while its neighbours
// wait, on a connection fresh from a start or a reconnect; in rueidis's
// synchronous mode the expired deadline closed the connection under the
// neighbour (the red run: "context deadline exceeded" for the PING).
func TestExpiredDeadlineFailsOnlyItsCommand(t *testing.T) {
	testenv.Require(t, testenv.RedisAddr())
	for round := range 3 { // each on a new client: the synchronous mode is a new connection's
		c, err := redisconn.New(testenv.RedisAddr(), rueidis.ClientOption{DisableCache: true, PipelineMultiplex: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx := testenv.Context(t)
		slow := make(chan error, 1)
		go func() {
			sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			slow <- c.Do(sctx, c.B().Eval().Script(holdServer).Numkeys(0).Arg("300").Build()).Error()
		}()
		time.Sleep(20 * time.Millisecond) // the script is on the wire, its deadline not yet run out
		pong, err := c.Do(ctx, c.B().Ping().Build()).ToString()
		if err != nil || pong != "PONG" {
			t.Errorf("round %d: PING queued behind an expiring command: %q, %v; want PONG", round, pong, err)
		}
		if err := <-slow; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("round %d: the slow command: %v, want its deadline's error", round, err)
		}
		c.Close()
	}
}

// stallProxy forwards TCP connections to a Redis server. stall makes every
// connection open at that moment stop forwarding for good, without a reset,
// as when a middlebox loses a connection's state; new connections work.
type stallProxy struct {
	addr    string
	mu      sync.Mutex
	stalled []*atomic.Bool
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &stallProxy{addr: ln.Addr().String()}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			t.Cleanup(func() { in.Close(); out.Close() })
			stalled := new(atomic.Bool)
			p.mu.Lock()
			p.stalled = append(p.stalled, stalled)
			p.mu.Unlock()
			go forward(out, in, stalled)
			go forward(in, out, stalled)
		}
	}()
	return p
}

func (p *stallProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.stalled {
		s.Store(true)
	}
}

// forward copies src to dst until either fails; once stalled, what src
// sends is read and dropped.
func forward(dst, src net.Conn, stalled *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A pipelined connection whose link died without a reset is dropped and
// dialled again within seconds: a command's expired deadline no longer
// closes it, so rueidis's ping has to find it, and its default of 10 s
// without an answer left every command failing for about 11 s.
func TestDeadConnectionIsReplaced(t *testing.T) {
	testenv.Require(t, testenv.RedisAddr())
	p := newStallProxy(t, testenv.RedisAddr())
	c, err := redisconn.New(p.addr, rueidis.ClientOption{DisableCache: true, PipelineMultiplex: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := testenv.Context(t)
	ping := func() error {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		return c.Do(pctx, c.B().Ping().Build()).Error()
	}
	if err := ping(); err != nil {
		t.Fatal(err)
	}
	p.stall()
	start := time.Now()
	for ping() != nil {
		if time.Since(start) > 8*time.Second { // rueidis's default took about 11 s
			t.Fatalf("still failing %v after the link died: the dead connection was not replaced", time.Since(start))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("answered again %v after the link died", time.Since(start).Round(time.Millisecond))
}
