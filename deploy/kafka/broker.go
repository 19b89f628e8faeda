package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
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
		kfake.AllowAutoTopicCreation(),
		kfake.GroupMinSessionTimeout(groupMinSessionTimeout),
		kfake.GroupMaxSessionTimeout(groupMaxSessionTimeout),
		kfake.WithLogger(kfakeLogger{log}),
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
		if cfg.SyncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
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

// kfakeLogger forwards kfake's printf logs to slog. kfake logs every request
// at its info level, so that maps to slog debug.
type kfakeLogger struct{ log *slog.Logger }

func (l kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	case kfake.LogLevelInfo:
		lvl = slog.LevelDebug
	default:
		lvl = slog.LevelDebug - 4
	}
	ctx := context.Background()
	if !l.log.Enabled(ctx, lvl) {
		return
	}
	l.log.Log(ctx, lvl, "kfake", "detail", fmt.Sprintf(format, args...))
}
