package redisconn_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/pkg/redisconn"
	"flashsale/tools/testenv"
)

func TestParseMemoryInfo(t *testing.T) {
	const real = "# Memory\r\nused_memory:1031240\r\nused_memory_human:1007.07K\r\nmaxmemory:67108864\r\nmaxmemory_human:64.00M\r\nmaxmemory_policy:allkeys-lru\r\nallocator_frag_ratio:1.00\r\n"
	tests := []struct {
		name, info string
		max        int64
		policy     string
		wantErr    bool
	}{
		{"a server's answer", real, 64 << 20, "allkeys-lru", false},
		{"no limit", "maxmemory:0\nmaxmemory_policy:noeviction\n", 0, "noeviction", false},
		{"no policy", "maxmemory:0\n", 0, "", true},
		{"no limit field", "maxmemory_policy:noeviction\n", 0, "", true},
		{"a limit that is not a number", "maxmemory:lots\nmaxmemory_policy:noeviction\n", 0, "", true},
		{"negative", "maxmemory:-1\nmaxmemory_policy:noeviction\n", 0, "", true},
		{"empty", "", 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max, policy, err := redisconn.ParseMemoryInfo(tt.info)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && (max != tt.max || policy != tt.policy) {
				t.Errorf("got %d %q, want %d %q", max, policy, tt.max, tt.policy)
			}
		})
	}
}

func TestNodeMemoryEvicts(t *testing.T) {
	for _, tt := range []struct {
		m    redisconn.NodeMemory
		want bool
	}{
		{redisconn.NodeMemory{MaxMemory: 0, Policy: "allkeys-lru"}, false}, // no limit, nothing to evict for
		{redisconn.NodeMemory{MaxMemory: 1 << 30, Policy: "noeviction"}, false},
		{redisconn.NodeMemory{MaxMemory: 1 << 30, Policy: "allkeys-lru"}, true},
		{redisconn.NodeMemory{MaxMemory: 1 << 30, Policy: "volatile-ttl"}, true}, // a sale's accepted records and tokens have a TTL
	} {
		if got := tt.m.Evicts(); got != tt.want {
			t.Errorf("%v: Evicts %v, want %v", tt.m, got, tt.want)
		}
	}
}

// A server with a memory limit and an evicting policy is refused, by name;
// one that refuses writes when full, or has no limit, passes; a policy
// changed under a running service is seen by the readiness watch, both
// ways, and logged once each way.
func TestCheckEviction(t *testing.T) {
	ctx := testenv.Context(t)
	for _, tt := range []struct {
		name    string
		args    []string
		evicts  bool
		mention string
	}{
		{"no limit (the stack's)", nil, false, ""},
		{"a limit, noeviction", []string{"--maxmemory", "64mb", "--maxmemory-policy", "noeviction"}, false, ""},
		{"a limit, allkeys-lru", []string{"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"}, true, "allkeys-lru"},
		{"a limit, volatile-lru", []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"}, true, "volatile-lru"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := testenv.ThrowawayRedis(t, tt.args...)
			c := testenv.RedisClient(t, addr)
			err := redisconn.CheckEviction(ctx, c)
			if got := errors.Is(err, redisconn.ErrEvicts); got != tt.evicts || (!tt.evicts && err != nil) {
				t.Fatalf("CheckEviction: %v, want evicting %v", err, tt.evicts)
			}
			if tt.evicts && (!strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), tt.mention)) {
				t.Errorf("error %q does not name the node %s and its policy %s", err, addr, tt.mention)
			}
			if err := redisconn.RefuseEviction(ctx, c, slog.New(slog.DiscardHandler)); (err != nil) != tt.evicts {
				t.Errorf("RefuseEviction: %v", err)
			}
		})
	}

	t.Run("changed under a running service", func(t *testing.T) {
		addr := testenv.ThrowawayRedis(t)
		c := testenv.RedisClient(t, addr)
		var logs bytes.Buffer
		w := redisconn.NewWatch(c, 0, 0, slog.New(slog.NewTextHandler(&logs, nil)))
		set := func(policy, max string) {
			t.Helper()
			for k, v := range map[string]string{"maxmemory-policy": policy, "maxmemory": max} {
				if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue(k, v).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Err(ctx); err != nil {
			t.Fatalf("at start: %v", err)
		}
		set("allkeys-lfu", "1gb")
		for range 2 {
			if err := w.Err(ctx); !errors.Is(err, redisconn.ErrEvicts) {
				t.Fatalf("after CONFIG SET allkeys-lfu: %v", err)
			}
		}
		set("noeviction", "1gb")
		if err := w.Err(ctx); err != nil {
			t.Fatalf("after CONFIG SET noeviction: %v", err)
		}
		if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
			t.Errorf("%d error lines, want 1 (one per change):\n%s", n, logs.String())
		}
		if !strings.Contains(logs.String(), "ready again") {
			t.Errorf("the return to noeviction was not logged:\n%s", logs.String())
		}
	})

	t.Run("asked at most once per interval", func(t *testing.T) {
		addr := testenv.ThrowawayRedis(t)
		c := testenv.RedisClient(t, addr)
		w := redisconn.NewWatch(c, time.Hour, 0, slog.New(slog.DiscardHandler))
		if err := w.Err(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("maxmemory-policy", "allkeys-lru").ParameterValue("maxmemory", "1gb").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if err := w.Err(ctx); err != nil {
			t.Errorf("asked again within the interval: %v", err)
		}
	})

	// A user whose ACL forbids INFO cannot learn the policy: that is
	// logged and let through, not taken for an evicting server.
	t.Run("INFO refused", func(t *testing.T) {
		addr := testenv.ThrowawayRedis(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
		admin := testenv.RedisClient(t, addr)
		if err := admin.Do(ctx, admin.B().AclSetuser().Username("shop").Rule("on", ">shop-pass", "~*", "+@all", "-info").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		c, err := redisconn.New("redis://shop:shop-pass@"+addr, rueidis.ClientOption{DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := redisconn.CheckEviction(ctx, c); !errors.Is(err, redisconn.ErrUncheckable) || errors.Is(err, redisconn.ErrEvicts) {
			t.Fatalf("CheckEviction without INFO: %v, want ErrUncheckable", err)
		}
		var logs bytes.Buffer
		if err := redisconn.RefuseEviction(ctx, c, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Errorf("RefuseEviction without INFO: %v, want a warning only", err)
		}
		if !strings.Contains(logs.String(), "cannot check") {
			t.Errorf("no warning logged: %q", logs.String())
		}
	})
}

// A node that does not answer at start (a cluster's dead replica) is
// warned about, not held against the service: its client's own dial found
// a Redis that answers, and readiness asks again.
func TestRefuseEvictionPassesANodeThatDoesNotAnswer(t *testing.T) {
	ctx := testenv.Context(t)
	addr := testenv.ThrowawayRedis(t)
	c := testenv.RedisClient(t, addr)
	_ = c.Do(ctx, c.B().Shutdown().Nosave().Build()).Error() // its answer may not come
	var logs bytes.Buffer
	if err := redisconn.RefuseEviction(ctx, c, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatalf("RefuseEviction with the node gone: %v, want a warning only", err)
	}
	if !strings.Contains(logs.String(), "cannot check") {
		t.Errorf("no warning logged: %q", logs.String())
	}
}

// Every node of the stack's Redis Cluster is asked, and none evicts.
func TestCheckEvictionCluster(t *testing.T) {
	addr := testenv.RequireCluster(t)
	ctx := testenv.Context(t)
	c := testenv.RedisClient(t, addr)
	nodes, err := redisconn.Memory(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) < 3 {
		t.Errorf("asked %d nodes, want every master of the cluster (3): %v", len(nodes), nodes)
	}
	if err := redisconn.CheckEviction(ctx, c); err != nil {
		t.Errorf("the stack's cluster: %v", err)
	}
}
