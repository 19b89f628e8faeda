// Package redisconn builds every binary's Redis client from one setting,
// FLASHSALE_REDIS_ADDR, so a single node and a Redis Cluster take the same
// code path. The setting is one host:port or a comma-separated list of
// them. rueidis decides the mode itself: it asks the first node that
// answers for CLUSTER SLOTS and, when that node has cluster support
// disabled and only one address was given, falls back to a single-node
// client. A list therefore means a cluster (its seed nodes); any one live
// seed is enough, the client learns the rest of the topology from it.
package redisconn

import (
	"errors"
	"fmt"
	"net"
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

// Validate checks a setting without dialing, for config validation.
func Validate(list string) error {
	_, err := Addrs(list)
	return err
}

// New dials Redis at list with base's tuning (timeouts, caching,
// pipelining); InitAddress is taken from list, and a cluster client also
// refreshes its slot map every TopologyRefresh unless base sets another
// interval.
func New(list string, base rueidis.ClientOption) (rueidis.Client, error) {
	addrs, err := Addrs(list)
	if err != nil {
		return nil, err
	}
	base.InitAddress = addrs
	if base.ClusterOption.ShardsRefreshInterval == 0 {
		base.ClusterOption.ShardsRefreshInterval = TopologyRefresh
	}
	c, err := rueidis.NewClient(base)
	if err != nil {
		return nil, fmt.Errorf("connect redis %s: %w", strings.Join(addrs, ","), err)
	}
	return c, nil
}

// IsCluster reports whether c talks to a Redis Cluster.
func IsCluster(c rueidis.Client) bool { return c.Mode() == rueidis.ClientModeCluster }
