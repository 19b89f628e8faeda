// Package stackctl starts, stops and kills the servers of the local stack
// for the tests that inject faults. Each function runs the one script of
// deploy/stack/ that owns the server (redis.sh, postgres.sh, kafka.sh,
// redis-cluster.sh, kafka-cluster.sh) with the test's environment, so a
// stack on other ports (FLASHSALE_*_PORT, FLASHSALE_STACK_DIR) is driven
// the same way; no test builds a script's command line itself.
package stackctl

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"flashsale/tools/testenv"
)

// Service is one server of the local stack, named as deploy/stack.sh names
// it.
type Service struct{ name string }

// The services of the local stack.
var (
	// Redis is the single node; it keeps nothing across a restart.
	Redis = Service{"redis"}
	// Postgres stops with pg_ctl -m fast (clients disconnected, checkpoint).
	Postgres = Service{"postgres"}
	// Kafka is the one-node broker; Stop is a controlled shutdown (SIGTERM).
	Kafka = Service{"kafka"}
	// RedisCluster is the six-node Redis Cluster; Start after a kill waits
	// for the failover before bringing the dead nodes back as replicas.
	RedisCluster = Service{"redis-cluster"}
	// KafkaCluster is the three-node Kafka cluster; Start starts the nodes
	// that are not running and waits for all three.
	KafkaCluster = Service{"kafka-cluster"}
)

func (s Service) String() string { return s.name }

// Start starts the service if it is not running and returns once it
// answers.
func (s Service) Start(ctx context.Context) error {
	_, err := run(ctx, s.name, "start")
	return err
}

// Stop stops the service gracefully (each service's way is on its
// variable) and returns once it is gone.
func (s Service) Stop(ctx context.Context) error {
	_, err := run(ctx, s.name, "stop")
	return err
}

// KafkaPid is the one-node broker's process id, for tests that freeze
// (SIGSTOP) or crash (SIGKILL) it.
func KafkaPid(ctx context.Context) (int, error) {
	return runPid(ctx, Kafka.name, "pid")
}

// KillKafkaNode SIGKILLs Kafka cluster node id (1..3), as a crashed
// machine: no controlled shutdown. It returns the killed process's id once
// it is gone.
func KillKafkaNode(ctx context.Context, id int) (int, error) {
	return runPid(ctx, KafkaCluster.name, "kill-node", strconv.Itoa(id))
}

// StartKafkaNode starts Kafka cluster node id (1..3) again without waiting
// for it to join (KafkaCluster.Start waits for all three).
func StartKafkaNode(ctx context.Context, id int) error {
	_, err := run(ctx, KafkaCluster.name, "start-node", strconv.Itoa(id))
	return err
}

// runPid runs a script command that prints a process id.
func runPid(ctx context.Context, script string, args ...string) (int, error) {
	out, err := run(ctx, script, args...)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("deploy/stack/%s.sh %s printed %q, want a process id", script, strings.Join(args, " "), out)
	}
	return pid, nil
}

// run runs deploy/stack/SCRIPT.sh ARGS from the repository and returns its
// standard output; an error carries what it wrote to standard error.
func run(ctx context.Context, script string, args ...string) ([]byte, error) {
	root, err := testenv.Root()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, "deploy", "stack", script+".sh")
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("deploy/stack/%s.sh %s: %w\n%s", script, strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}
