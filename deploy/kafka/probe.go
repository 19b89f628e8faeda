package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errTopicMissing means the broker answered but lacks a seeded topic.
var errTopicMissing = errors.New("topic missing")

// probe asks the broker on cfg.Port for metadata of the seeded topics,
// without creating them, and succeeds only when every one has partitions.
// deploy/stack.sh polls it to know the broker is ready.
func probe(ctx context.Context, cfg Config, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.ProbeTimeout)
	defer cancel()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.DialTimeout(cfg.ProbeTimeout),
		kgo.RequestRetries(0),
	)
	if err != nil {
		return fmt.Errorf("probe %s: new client: %w", addr, err)
	}
	defer cl.Close()

	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	for _, t := range seededTopics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("probe %s: metadata: %w", addr, err)
	}

	found := make(map[string]int, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic == nil || kerr.ErrorForCode(t.ErrorCode) != nil {
			continue
		}
		found[*t.Topic] = len(t.Partitions)
	}
	var (
		errs  []error
		parts []string
	)
	for _, t := range seededTopics {
		n := found[t]
		if n == 0 {
			errs = append(errs, fmt.Errorf("probe %s: %s: %w", addr, t, errTopicMissing))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%d", t, n))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kafka %s ok, partitions %s\n", addr, strings.Join(parts, " "))
	return nil
}
