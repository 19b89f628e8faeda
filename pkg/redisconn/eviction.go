package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// ErrEvicts: a Redis node has a memory limit and a policy that lets it
// delete keys to stay under it. A sale's keys are its only copy of the
// stock while it runs: an evicted holders hash lets shoppers buy twice and
// loses their units, an evicted stock key stops the sale, an evicted
// accepted record or spent admission token breaks what the shopper was
// told. Every flash-sale key lives in a Redis that refuses writes when full
// (maxmemory-policy noeviction, or no maxmemory at all).
var ErrEvicts = errors.New("redis may evict the sale's keys: set maxmemory-policy noeviction (or maxmemory 0) on every node")

// NodeMemory is what one node's INFO memory says about eviction.
type NodeMemory struct {
	Addr      string
	MaxMemory int64  // bytes; 0 is no limit
	Policy    string // maxmemory-policy
}

// Evicts reports whether the node may delete keys on its own: only with a
// limit, and a policy other than noeviction.
func (m NodeMemory) Evicts() bool { return m.MaxMemory > 0 && m.Policy != "noeviction" }

func (m NodeMemory) String() string {
	return fmt.Sprintf("%s (maxmemory %d, maxmemory-policy %s)", m.Addr, m.MaxMemory, m.Policy)
}

// ParseMemoryInfo reads maxmemory and maxmemory_policy from the text of
// INFO memory; both must be there.
func ParseMemoryInfo(info string) (maxMemory int64, policy string, err error) {
	var haveMax bool
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "maxmemory":
			if maxMemory, err = strconv.ParseInt(v, 10, 64); err != nil || maxMemory < 0 {
				return 0, "", fmt.Errorf("INFO memory: maxmemory %q is not a byte count", v)
			}
			haveMax = true
		case "maxmemory_policy":
			policy = v
		}
	}
	if !haveMax || policy == "" {
		return 0, "", errors.New("INFO memory: no maxmemory or maxmemory_policy field")
	}
	return maxMemory, policy, nil
}

// Memory asks every node the client knows (a cluster's masters and the
// replicas it holds connections to) for its memory limit and policy,
// sorted by address.
func Memory(ctx context.Context, c rueidis.Client) ([]NodeMemory, error) {
	nodes := c.Nodes()
	out := make([]NodeMemory, 0, len(nodes))
	var errs []error
	for addr, n := range nodes {
		info, err := n.Do(ctx, n.B().Info().Section("memory").Build()).ToString()
		if err != nil {
			errs = append(errs, fmt.Errorf("redis %s: INFO memory: %w", addr, err))
			continue
		}
		max, policy, err := ParseMemoryInfo(info)
		if err != nil {
			errs = append(errs, fmt.Errorf("redis %s: %w", addr, err))
			continue
		}
		out = append(out, NodeMemory{Addr: addr, MaxMemory: max, Policy: policy})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out, errors.Join(errs...)
}

// CheckEviction returns an error wrapping ErrEvicts that names every node
// that may evict keys, or the error of a node that could not be asked. A
// node whose server refuses INFO (an ACL without it, a managed Redis that
// renames it) cannot be checked and is not held against the caller: that
// error is returned wrapped in ErrUncheckable, which callers log and pass.
func CheckEviction(ctx context.Context, c rueidis.Client) error {
	nodes, err := Memory(ctx, c)
	var bad []string
	for _, n := range nodes {
		if n.Evicts() {
			bad = append(bad, n.String())
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrEvicts, strings.Join(bad, "; "))
	}
	if err != nil {
		var re *rueidis.RedisError
		if errors.As(err, &re) {
			return fmt.Errorf("%w: %w", ErrUncheckable, err)
		}
		return err
	}
	return nil
}

// ErrUncheckable: a node answered INFO memory with an error of its own,
// so its eviction policy is unknown.
var ErrUncheckable = errors.New("redis eviction policy unknown")

// RefuseEviction is the start-up check of a binary that writes a sale's
// keys: it fails when a node may evict them, and logs a warning when a
// node cannot be asked (its ACL refuses INFO, or it does not answer: a
// cluster's dead replica must not keep a service from starting; the
// client's own dial has already found a Redis that answers), and
// otherwise says nothing. Readiness asks again (Watch).
func RefuseEviction(ctx context.Context, c rueidis.Client, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := CheckEviction(ctx, c)
	if err != nil && !errors.Is(err, ErrEvicts) {
		log.Warn("cannot check Redis's eviction policy; it must be noeviction", "err", err)
		return nil
	}
	return err
}
