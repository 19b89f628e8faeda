package harness

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"flashsale/pkg/redisconn"
	"flashsale/tools/stackctl"
)

// Redis Cluster helpers for failover tests against the local cluster that
// deploy/stack/redis-cluster.sh starts (FLASHSALE_CLUSTER=1).

// nodeClient talks to one cluster node only, never following redirects.
func nodeClient(addr string) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true,
		DisableCache: true, Dialer: net.Dialer{Timeout: time.Second}, ConnWriteTimeout: 2 * time.Second,
		DisableRetry: true})
}

// nodeDo runs one command on one node with a short bound.
func nodeDo(addr string, build func(rueidis.Builder) rueidis.Completed) (rueidis.RedisResult, error) {
	c, err := nodeClient(addr)
	if err != nil {
		return rueidis.RedisResult{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r := c.Do(ctx, build(c.B()))
	return r, r.Error()
}

// slotMaster asks the live node at seed which master serves key's slot and
// whether the cluster state is ok there.
func slotMaster(seed, key string) (master string, ok bool, err error) {
	r, err := nodeDo(seed, func(b rueidis.Builder) rueidis.Completed { return b.ClusterKeyslot().Key(key).Build() })
	if err != nil {
		return "", false, fmt.Errorf("cluster keyslot on %s: %w", seed, err)
	}
	slot, _ := r.AsInt64()
	r, err = nodeDo(seed, func(b rueidis.Builder) rueidis.Completed { return b.ClusterSlots().Build() })
	if err != nil {
		return "", false, fmt.Errorf("cluster slots on %s: %w", seed, err)
	}
	ranges, err := r.ToArray()
	if err != nil {
		return "", false, err
	}
	for _, rg := range ranges {
		v, err := rg.ToArray()
		if err != nil || len(v) < 3 {
			continue
		}
		from, _ := v[0].AsInt64()
		to, _ := v[1].AsInt64()
		if slot < from || slot > to {
			continue
		}
		node, err := v[2].ToArray()
		if err != nil || len(node) < 2 {
			return "", false, fmt.Errorf("cluster slots on %s: bad node entry", seed)
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		master = net.JoinHostPort(host, strconv.FormatInt(port, 10))
		break
	}
	if master == "" {
		return "", false, fmt.Errorf("slot %d of %s has no master on %s", slot, key, seed)
	}
	r, err = nodeDo(seed, func(b rueidis.Builder) rueidis.Completed { return b.ClusterInfo().Build() })
	if err != nil {
		return master, false, err
	}
	info, _ := r.ToString()
	return master, strings.Contains(info, "cluster_state:ok"), nil
}

// liveSeed returns the first seed of the list that answers PING.
func liveSeed(seeds string, except ...string) (string, error) {
	addrs, err := redisconn.Addrs(seeds)
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if contains(except, a) {
			continue
		}
		if _, err := nodeDo(a, func(b rueidis.Builder) rueidis.Completed { return b.Ping().Build() }); err == nil {
			return a, nil
		}
	}
	return "", fmt.Errorf("no live node among %s", seeds)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MasterOf returns host:port of the master serving key's slot.
func MasterOf(t testing.TB, seeds, key string) string {
	t.Helper()
	seed, err := liveSeed(seeds)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := slotMaster(seed, key)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// KillRedisNode SIGKILLs the redis-server at addr (its pid read from INFO),
// as a crashed machine: no SHUTDOWN, no goodbye to the cluster. It waits
// until the port is closed, and registers a cleanup that heals the cluster
// (HealRedisCluster) so later tests find it whole.
func KillRedisNode(t testing.TB, addr string) {
	t.Helper()
	r, err := nodeDo(addr, func(b rueidis.Builder) rueidis.Completed { return b.Info().Section("server").Build() })
	if err != nil {
		t.Fatalf("info server on %s: %v", addr, err)
	}
	info, _ := r.ToString()
	var pid int
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid <= 1 {
		t.Fatalf("no process_id in INFO of %s", addr)
	}
	t.Cleanup(func() { HealRedisCluster(t) })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill redis node %s (pid %d): %v", addr, pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("redis node %s still accepts connections 10s after SIGKILL", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitFailover waits until a live node reports key's slot served by a
// master other than dead and the cluster state ok, and returns the new
// master. cluster-node-timeout is 2 s in the local stack, so this takes a
// few seconds; the bound is generous because it is not what is tested.
func WaitFailover(t testing.TB, seeds, key, dead string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		seed, err := liveSeed(seeds, dead)
		if err == nil {
			m, ok, err := slotMaster(seed, key)
			if err == nil && ok && m != dead {
				return m
			}
			last = err
		} else {
			last = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no failover of %s's slot away from %s within 60s (last error: %v)", key, dead, last)
	return ""
}

// HealRedisCluster brings killed cluster nodes back through the cluster's
// own script (stackctl.RedisCluster), which waits for the failover to
// finish first so a restarted empty master cannot wipe its replica, and
// then for every node to be healthy.
func HealRedisCluster(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := stackctl.RedisCluster.Start(ctx); err != nil {
		t.Errorf("heal redis cluster: %v", err)
	}
}
