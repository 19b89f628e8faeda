// Package redisconn builds every binary's Redis client from one setting,
// FLASHSALE_REDIS_ADDR, so a single node and a Redis Cluster take the same
// code path. The setting is one host:port or a comma-separated list of
// them, or a URL (rueidis.ParseURL) for a server that wants a password or
// TLS: redis://[user:password@]host:port[/db], rediss:// for TLS, and
// ?addr=host2:port2&addr=... for more cluster seeds. rueidis decides the mode itself: it asks the first node that
// answers for CLUSTER SLOTS and, when that node has cluster support
// disabled and only one address was given, falls back to a single-node
// client. A list therefore means a cluster (its seed nodes); any one live
// seed is enough, the client learns the rest of the topology from it.
package redisconn

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// ErrNoAddress: the setting names no address at all.
var ErrNoAddress = errors.New("redisconn: no Redis address")

// TopologyRefresh is how often a cluster client re-reads the slot map in
// the background, besides the refresh that a MOVED answer or a broken
// connection triggers. It bounds how long a client keeps sending to a
// failed master's address after a replica took over without it noticing
// by an error first.
const TopologyRefresh = 2 * time.Second

// Multiplex is the rueidis PipelineMultiplex that opens conns pipelined
// connections to each Redis node: conns must be a power of two from 1 to
// 256 (rueidis opens 2^multiplex of them, and -1 means exactly one).
func Multiplex(conns int) (int, error) {
	if conns < 1 || conns > 1<<rueidis.MaxPipelineMultiplex || conns&(conns-1) != 0 {
		return 0, fmt.Errorf("want a power of two from 1 to %d connections per Redis node, got %d", 1<<rueidis.MaxPipelineMultiplex, conns)
	}
	if conns == 1 {
		return -1, nil
	}
	return bits.TrailingZeros(uint(conns)), nil
}

// Addrs parses a comma-separated list of host:port, ignoring blanks, and
// reports every malformed entry at once.
func Addrs(list string) ([]string, error) {
	var out []string
	var errs []error
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("redis address %q: want host:port", a))
			continue
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
			errs = append(errs, fmt.Errorf("redis address %q: want host:port with a port in 1..65535", a))
			continue
		}
		out = append(out, a)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, ErrNoAddress
	}
	return out, nil
}

// IsURL reports whether the setting is a URL rather than a host:port list.
func IsURL(setting string) bool { return strings.Contains(setting, "://") }

// Options returns base with the addresses, and for a URL the credentials,
// TLS and database, of the setting. Its errors never contain the setting,
// which may hold a password.
func Options(setting string, base rueidis.ClientOption) (rueidis.ClientOption, error) {
	if !IsURL(setting) {
		addrs, err := Addrs(setting)
		base.InitAddress = addrs
		return base, err
	}
	u, err := url.Parse(strings.TrimSpace(setting))
	if err != nil {
		return base, errors.New("redis URL: malformed (want redis://[user:password@]host:port[/db] or rediss://...)")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return base, fmt.Errorf("redis URL: scheme %q, want redis or rediss", u.Scheme)
	}
	if u.Port() == "" {
		return base, errors.New("redis URL: want an explicit port")
	}
	opt, err := rueidis.ParseURL(u.String())
	if err != nil {
		return base, fmt.Errorf("redis URL: %w", err)
	}
	base.InitAddress = opt.InitAddress
	base.Username, base.Password = opt.Username, opt.Password
	base.TLSConfig = opt.TLSConfig
	base.SelectDB = opt.SelectDB
	base.ClientName = opt.ClientName
	base.AlwaysRESP2 = base.AlwaysRESP2 || opt.AlwaysRESP2
	if opt.Dialer.Timeout > 0 {
		base.Dialer.Timeout = opt.Dialer.Timeout
	}
	if opt.ConnWriteTimeout > 0 {
		base.ConnWriteTimeout = opt.ConnWriteTimeout
	}
	return base, nil
}

// Validate checks a setting without dialing, for config validation.
func Validate(setting string) error {
	_, err := Options(setting, rueidis.ClientOption{})
	return err
}

// DeadConnTimeout is how long an idle-looking pipelined connection may
// leave a PING unanswered before rueidis drops it and dials again (its
// ConnWriteTimeout, when base sets none; rueidis's own default is 10 s).
// A pipelined connection is not closed when a command's deadline runs
// out, so this ping is what finds one whose link died without a reset (a
// middlebox that lost its state): every command meanwhile runs into its
// deadline. Found within about a second plus this.
const DeadConnTimeout = 2 * time.Second

// New dials Redis as the setting says (a host:port list or a URL) with
// base's tuning (timeouts, caching, pipelining); a cluster client also
// refreshes its slot map every TopologyRefresh unless base sets another
// interval. A server that refuses the credentials is named as such.
//
// Every connection pipelines from its first command (rueidis
// AlwaysPipelining). Without it a connection starts in a synchronous mode
// that sets the socket's deadline from the command's context, and a
// command whose deadline runs out there closes the connection, failing
// every command queued behind it with that command's error: one
// purchase's expired Redis timeout would answer its neighbours 503, after
// every start and every reconnect. Pipelined, an expired command is
// abandoned alone and its late answer read and dropped.
func New(setting string, base rueidis.ClientOption) (rueidis.Client, error) {
	opt, err := Options(setting, base)
	if err != nil {
		return nil, err
	}
	opt.AlwaysPipelining = !opt.DisableAutoPipelining
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = DeadConnTimeout
	}
	if opt.ClusterOption.ShardsRefreshInterval == 0 {
		opt.ClusterOption.ShardsRefreshInterval = TopologyRefresh
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		where := strings.Join(opt.InitAddress, ",")
		if re, ok := rueidis.IsRedisErr(err); ok && (strings.HasPrefix(re.Error(), "WRONGPASS") || strings.HasPrefix(re.Error(), "NOAUTH")) {
			return nil, fmt.Errorf("connect redis %s: the server refused the credentials (user and password of the redis:// URL in FLASHSALE_REDIS_ADDR): %w", where, err)
		}
		return nil, fmt.Errorf("connect redis %s: %w", where, err)
	}
	return c, nil
}

// IsCluster reports whether c talks to a Redis Cluster.
func IsCluster(c rueidis.Client) bool { return c.Mode() == rueidis.ClientModeCluster }
