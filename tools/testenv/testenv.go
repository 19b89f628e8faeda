// Package testenv gives integration tests the addresses of the local stack
// (deploy/stack.sh, ports from deploy/stack.env) and fails a test, never skips it, when a server it needs
// does not answer. Run `make up` first; `make test` does.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"

	"flashsale/pkg/redisconn"
	"flashsale/pkg/schema"
)

// Defaults match deploy/stack.sh; the FLASHSALE_* variables override them.
// RedisAddr may be a comma-separated list (a cluster's seed nodes): every
// binary accepts the same setting (see pkg/redisconn).
func RedisAddr() string {
	return env("FLASHSALE_REDIS_ADDR", "127.0.0.1:"+stackSetting("FLASHSALE_REDIS_PORT"))
}

// clusterNodes is how many nodes deploy/stack.sh starts for the cluster.
const clusterNodes = 6

// RedisClusterAddr is the seed list of the local Redis Cluster that
// `deploy/stack.sh up` starts with FLASHSALE_CLUSTER=1:
// FLASHSALE_REDIS_CLUSTER_ADDR, or the six nodes from
// FLASHSALE_REDIS_CLUSTER_PORT (17001) on.
func RedisClusterAddr() string {
	if v := os.Getenv("FLASHSALE_REDIS_CLUSTER_ADDR"); v != "" {
		return v
	}
	base, err := strconv.Atoi(stackSetting("FLASHSALE_REDIS_CLUSTER_PORT"))
	if err != nil {
		return "redis-cluster-port-unknown:0"
	}
	addrs := make([]string, clusterNodes)
	for i := range addrs {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(base+i)
	}
	return strings.Join(addrs, ",")
}

// ClusterRequired reports whether the scaled-out shape (Redis Cluster and
// Kafka cluster) is part of this run's stack (FLASHSALE_CLUSTER=1, which
// `make test` sets; FLASHSALE_REDIS_CLUSTER is read too): then a test that
// needs it fails when it is down instead of skipping.
func ClusterRequired() bool {
	v := os.Getenv("FLASHSALE_CLUSTER")
	if v == "" {
		v = os.Getenv("FLASHSALE_REDIS_CLUSTER")
	}
	switch v {
	case "1", "true", "yes":
		return true
	}
	return false
}

// RequireCluster returns the local cluster's seed list once its state is
// ok. When it is not up it fails t if ClusterRequired, and otherwise skips
// t saying how to start it.
func RequireCluster(t testing.TB) string {
	t.Helper()
	addr := RedisClusterAddr()
	err := clusterOK(addr)
	switch {
	case err == nil:
		return addr
	case ClusterRequired():
		t.Fatalf("Redis Cluster %s is not up (%v): run `make up CLUSTER=1` (FLASHSALE_CLUSTER=1 is set, so this fails rather than skips)", addr, err)
	default:
		t.Skipf("Redis Cluster %s is not up (%v): run `make up CLUSTER=1` to run this test (make test does)", addr, err)
	}
	return ""
}

func clusterOK(list string) error {
	addrs, err := redisconn.Addrs(list)
	if err != nil {
		return err
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs[:1], DisableCache: true, ForceSingleClient: true,
		Dialer: net.Dialer{Timeout: 2 * time.Second}})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Do(ctx, c.B().ClusterInfo().Build()).ToString()
	if err != nil {
		return fmt.Errorf("cluster info: %w", err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Errorf("cluster state is not ok")
	}
	return nil
}

// RedisClient connects to addr (one node or a cluster's seed list) the way
// the services do, and closes the client when the test ends.
func RedisClient(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := redisconn.New(addr, rueidis.ClientOption{DisableCache: true})
	if err != nil {
		t.Fatalf("redis %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// DeleteKeys removes every key matching pattern (SCAN MATCH syntax) from
// every node behind c. On a cluster a key lives on one master, so one
// SCAN (or one FLUSHDB) through the cluster client would see a single
// node; this walks them all, and deletes key by key so no command spans
// two slots. It returns how many keys it deleted.
func DeleteKeys(ctx context.Context, c rueidis.Client, pattern string) (int, error) {
	seen := map[string]struct{}{}
	for addr, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return 0, fmt.Errorf("scan %s on %s: %w", pattern, addr, err)
			}
			for _, k := range e.Elements {
				seen[k] = struct{}{}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	n := 0
	for k := range seen {
		d, err := c.Do(ctx, c.B().Del().Key(k).Build()).AsInt64()
		if err != nil {
			return n, fmt.Errorf("delete %s: %w", k, err)
		}
		n += int(d)
	}
	return n, nil
}

// FlushAll empties every master behind c (FLUSHALL on each; replicas
// follow). Only for a test that owns its Redis: other tests sharing the
// stack lose their keys too. Prefer DeleteKeys with the test's own prefix.
func FlushAll(ctx context.Context, c rueidis.Client) error {
	for addr, node := range c.Nodes() {
		role, err := node.Do(ctx, node.B().Role().Build()).ToArray()
		if err != nil || len(role) == 0 {
			return fmt.Errorf("role of %s: %w", addr, err)
		}
		if r, _ := role[0].ToString(); r != "master" {
			continue
		}
		if err := node.Do(ctx, node.B().Flushall().Build()).Error(); err != nil {
			return fmt.Errorf("flushall on %s: %w", addr, err)
		}
	}
	return nil
}

// KafkaBrokers is the bootstrap list of the one-node Apache Kafka of the
// local stack.
func KafkaBrokers() string {
	return env("FLASHSALE_KAFKA_BROKERS", "127.0.0.1:"+stackSetting("FLASHSALE_KAFKA_PORT"))
}

// KafkaPartitions is the partition count of the stack's topics and of the
// topics its brokers create (FLASHSALE_KAFKA_PARTITIONS, deploy/stack.env):
// tests give their own topics the same, so they see the spread a sale does.
func KafkaPartitions() (int, error) {
	v := stackSetting("FLASHSALE_KAFKA_PARTITIONS")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("FLASHSALE_KAFKA_PARTITIONS %q: want a positive number (deploy/stack.env)", v)
	}
	return n, nil
}

// KafkaClusterNodes is how many nodes deploy/stack.sh starts for the Kafka
// cluster; node i (1-based) listens on KafkaClusterPort(i).
const KafkaClusterNodes = 3

// KafkaClusterPort is the client port of Kafka cluster node id (1-based):
// FLASHSALE_KAFKA_CLUSTER_PORT (19101) + id - 1, as deploy/stack/kafka-node.sh lays
// them out.
func KafkaClusterPort(id int) int {
	base, err := strconv.Atoi(stackSetting("FLASHSALE_KAFKA_CLUSTER_PORT"))
	if err != nil {
		return 0 // stackSetting names the problem where the address is used
	}
	return base + id - 1
}

// KafkaClusterProxiedPort is where node id advertises its PROXIED listener
// (client port + 30) and KafkaClusterProxiedUpstream where that listener
// really is (client port + 20): a fault test puts a TCP proxy from the
// first to the second, and a client bootstrapped through the proxies
// reaches every broker through them.
func KafkaClusterProxiedPort(id int) int     { return KafkaClusterPort(id) + 30 }
func KafkaClusterProxiedUpstream(id int) int { return KafkaClusterPort(id) + 20 }

// KafkaProxiedPort and KafkaProxiedUpstream are the same for the one-node
// Kafka (client port + 3 and + 2).
func KafkaProxiedPort() int     { return kafkaPort() + 3 }
func KafkaProxiedUpstream() int { return kafkaPort() + 2 }

func kafkaPort() int {
	p, err := strconv.Atoi(stackSetting("FLASHSALE_KAFKA_PORT"))
	if err != nil {
		return 0
	}
	return p
}

// KafkaClusterBrokers is the bootstrap list of the local three-node Kafka
// cluster (make up CLUSTER=1).
func KafkaClusterBrokers() string {
	addrs := make([]string, KafkaClusterNodes)
	for i := range addrs {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(KafkaClusterPort(i+1))
	}
	return strings.Join(addrs, ",")
}

// RequireKafkaCluster returns the Kafka cluster's bootstrap list once every
// node accepts connections; like RequireCluster it fails when
// ClusterRequired and skips otherwise.
func RequireKafkaCluster(t testing.TB) string {
	t.Helper()
	addr := KafkaClusterBrokers()
	for _, a := range strings.Split(addr, ",") {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			if ClusterRequired() {
				t.Fatalf("Kafka cluster node %s does not answer (%v): run `make up CLUSTER=1` (FLASHSALE_CLUSTER=1 is set, so this fails rather than skips)", a, err)
			}
			t.Skipf("Kafka cluster node %s does not answer (%v): run `make up CLUSTER=1` to run this test (make test does)", a, err)
		}
		c.Close()
	}
	return addr
}

// PostgresDSN is the connection string of the local PostgreSQL.
func PostgresDSN() string {
	return env("FLASHSALE_PG_DSN", fmt.Sprintf("postgres://flashsale@127.0.0.1:%s/flashsale?sslmode=disable", stackSetting("FLASHSALE_PG_PORT")))
}

// stackSetting is one of the local stack's settings: the environment's
// value, else deploy/stack.env's (the file deploy/stack.sh starts the
// servers from), found by walking up from the test's folder. Without
// either it names the problem in place of a value, so the address that
// uses it fails saying why.
func stackSetting(k string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	stackEnvOnce.Do(loadStackEnv)
	if v, ok := stackEnv[k]; ok {
		return v
	}
	return "missing-" + k + "-see-deploy-stack.env" + stackEnvErr
}

var (
	stackEnvOnce sync.Once
	stackEnv     map[string]string
	stackEnvErr  string
)

func loadStackEnv() {
	stackEnv = map[string]string{}
	dir, err := os.Getwd()
	if err != nil {
		stackEnvErr = "-" + err.Error()
		return
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "deploy", "stack.env"))
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
				if ok && !strings.HasPrefix(k, "#") {
					stackEnv[k] = v
				}
			}
			return
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			stackEnvErr = "-not-found-above-the-test-folder"
			return
		}
		dir = parent
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Require fails t unless every address accepts TCP connections. An
// argument may be a comma-separated list (a cluster's seeds): every entry
// must answer.
func Require(t testing.TB, addrs ...string) {
	t.Helper()
	var all []string
	for _, a := range addrs {
		for _, one := range strings.Split(a, ",") {
			if one = strings.TrimSpace(one); one != "" {
				all = append(all, one)
			}
		}
	}
	for _, a := range all {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			t.Fatalf("local stack server %s does not answer (%v): run `make up`", a, err)
		}
		c.Close()
	}
}

// PostgresAddr is host:port of the PostgreSQL that PostgresDSN names, for Require.
func PostgresAddr() string {
	if u, err := url.Parse(PostgresDSN()); err == nil && u.Host != "" {
		if u.Port() == "" {
			return net.JoinHostPort(u.Hostname(), "5432")
		}
		return u.Host
	}
	return "127.0.0.1:" + stackSetting("FLASHSALE_PG_PORT")
}

// Context returns a context bounded by the test's deadline (or 2 minutes).
func Context(t testing.TB) context.Context {
	t.Helper()
	d := 2 * time.Minute
	if tt, ok := t.(*testing.T); ok {
		if dl, ok := tt.Deadline(); ok {
			// leave a little time to report, but never a negative timeout
			d = max(time.Until(dl)*9/10, time.Until(dl)-5*time.Second)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Root is the repository: the folder of the go.work in use, where
// deploy/stack.sh lives and from which the binaries are built. Tests that
// need it run inside the repository with the workspace on.
func Root() (string, error) {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	w := strings.TrimSpace(string(out))
	if w == "" || w == "off" {
		return "", fmt.Errorf("no go.work in use (GOWORK=%q): run the tests inside the repository with the workspace on", w)
	}
	return filepath.Dir(w), nil
}

// Pool is a connection pool on the local stack's PostgreSQL, migrated to
// the newest schema, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	Require(t, PostgresAddr())
	ctx := Context(t)
	if err := schema.MigrateDSN(ctx, PostgresDSN()); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// FreshDatabase creates an empty database on the local PostgreSQL for one
// test, dropped when the test ends, and returns its connection string: for
// a test that needs a table and its planner statistics to itself. The
// local stack's role may create databases; another needs CREATEDB.
func FreshDatabase(t testing.TB) string {
	t.Helper()
	Require(t, PostgresAddr())
	ctx := Context(t)
	name := fmt.Sprintf("flashsale_test_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(ctx, PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, PostgresDSN())
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// BlackHole listens on a loopback port that accepts connections and never
// answers: a server that took the request and said nothing, as a frozen or
// partitioned one looks. Everything closes when the test ends.
func BlackHole(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// ThrowawayRedis runs a redis-server of its own (the one the local stack
// installs) on a free loopback port until the test ends, with args added
// to its command line (e.g. "--requirepass", "p", or "--maxmemory",
// "64mb"), and returns its address. For tests that need a server
// configured unlike the stack's, or that change its configuration. A port
// taken between the pick and the bind is retried.
func ThrowawayRedis(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not installed (deploy/stack.sh up installs it): %v", err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--logfile", ""}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		addr := "127.0.0.1:" + port
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			select {
			case <-exited: // the port was taken after all, or the arguments were refused
			default:
				if c, err := net.Dial("tcp", addr); err == nil {
					c.Close()
					t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
					return addr
				}
				continue
			}
			break
		}
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Fatalf("redis-server %v did not start in 5 attempts", args)
	return ""
}

// LogBuffer collects a service's log lines while a test reads them.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
