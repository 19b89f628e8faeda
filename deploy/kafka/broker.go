package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Session timeouts a group member may ask for. librdkafka (under
// confluent-kafka-go) defaults to 45 s and tests shorten it to speed up
// rebalances, so the window is Kafka's own broker default range widened
// downwards instead of kfake's 6 s .. 5 min.
const (
	groupMinSessionTimeout = time.Second
	groupMaxSessionTimeout = 30 * time.Minute
)

// errCloseTimeout means the graceful close did not finish in time; records
// already acknowledged are still on disk, but the snapshot may be missing and
// the next start replays the segments.
var errCloseTimeout = errors.New("graceful close timed out")

// serve runs the broker until ctx is done, then closes it gracefully so the
// snapshot, group offsets and producer state are on disk.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	opts := []kfake.Opt{
		kfake.Ports(cfg.Port), // one broker; kfake always binds 127.0.0.1
		kfake.ClusterID("flashsale-local"),
		kfake.SeedTopics(int32(cfg.Partitions), seededTopics...),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.GroupMinSessionTimeout(groupMinSessionTimeout),
		kfake.GroupMaxSessionTimeout(groupMaxSessionTimeout),
		kfake.WithLogger(kfakeLogger{log}),
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
		if cfg.SyncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	} else {
		// Nothing to persist, so kfake's own auto-creation is fine.
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start broker on port %d: %w", cfg.Port, err)
	}

	// SeedTopics only applies to an empty data folder; a folder written by
	// an older run (or one whose topics were deleted) gets them here.
	var ensureErr error
	for _, t := range seededTopics {
		if cluster.TopicInfo(t) != nil {
			continue
		}
		if err := cluster.CreateTopic(t, int32(cfg.Partitions), nil); err != nil {
			ensureErr = fmt.Errorf("create topic %s: %w", t, err)
			break
		}
	}
	if ensureErr != nil {
		return errors.Join(ensureErr, closeCluster(cluster, cfg.ShutdownTimeout))
	}
	if cfg.DataDir != "" {
		cluster.ControlKey(int16(kmsg.Metadata), durableAutoCreate(cluster, cfg.Partitions, log))
	}

	log.Info("broker listening",
		"addr", cluster.ListenAddrs()[0],
		"data_dir", cfg.DataDir,
		"sync_writes", cfg.DataDir != "" && cfg.SyncWrites,
		"partitions", cfg.Partitions,
		"topics", seededTopics)

	<-ctx.Done()
	log.Info("broker shutting down")
	if err := closeCluster(cluster, cfg.ShutdownTimeout); err != nil {
		return err
	}
	log.Info("broker stopped")
	return nil
}

// durableAutoCreate returns a kfake control function for Metadata requests
// that creates the topics a client asks to auto-create through
// Cluster.CreateTopic, then lets kfake answer as usual.
//
// Why: kfake's own auto-creation (AllowAutoTopicCreation, in its Metadata
// handler) does not write topics.json; only a graceful Close does. After a
// SIGKILL the topic was forgotten, its acknowledged records became
// unreachable, and recreating it appended to the orphaned segment files.
// CreateTopic writes topics.json before it returns, so the topic is durable
// before the client can produce. With a data folder, kfake's own
// auto-creation stays off, so a request that slips in before this control
// is registered gets a retriable UNKNOWN_TOPIC_OR_PARTITION instead.
//
// The control function runs on its own goroutine while kfake's loop keeps
// serving admin calls, so calling the Cluster from it does not deadlock.
// It never handles the request, so kfake keeps it for every Metadata call.
func durableAutoCreate(cluster *kfake.Cluster, partitions int, log *slog.Logger) func(kmsg.Request) (kmsg.Response, error, bool) {
	return func(req kmsg.Request) (kmsg.Response, error, bool) {
		mreq, ok := req.(*kmsg.MetadataRequest)
		if !ok || !mreq.AllowAutoTopicCreation {
			return nil, nil, false
		}
		for _, rt := range mreq.Topics {
			if rt.Topic == nil || *rt.Topic == "" || cluster.TopicInfo(*rt.Topic) != nil {
				continue
			}
			// A failure (invalid name, a concurrent create) falls
			// through to kfake, which answers with the right error.
			if err := cluster.CreateTopic(*rt.Topic, int32(partitions), nil); err != nil {
				log.Debug("auto-create topic through kfake", "topic", *rt.Topic, "err", err)
				continue
			}
			log.Info("topic auto-created", "topic", *rt.Topic, "partitions", partitions)
		}
		return nil, nil, false
	}
}

// closeCluster runs kfake's Close, which writes the snapshot before it
// returns, within timeout.
func closeCluster(cluster *kfake.Cluster, timeout time.Duration) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		cluster.Close()
	}()
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("close broker after %v: %w", timeout, errCloseTimeout)
	}
}

// kfakeLogger forwards kfake's printf-style logs to slog. kfake logs little
// (persistence trouble, unparsable requests), so levels map one to one.
type kfakeLogger struct{ log *slog.Logger }

func (l kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	case kfake.LogLevelInfo:
		lvl = slog.LevelInfo
	default:
		lvl = slog.LevelDebug
	}
	ctx := context.Background()
	if !l.log.Enabled(ctx, lvl) {
		return
	}
	l.log.Log(ctx, lvl, "kfake", "detail", fmt.Sprintf(format, args...))
}
