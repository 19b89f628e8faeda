package stackctl

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"flashsale/tools/testenv"
)

// The broker's pid comes from its own script and names the stack's broker,
// not some other java process. (Stopping and killing servers is exercised
// by the fault tests, which run alone: here other packages share the
// stack.)
func TestKafkaPid(t *testing.T) {
	testenv.Require(t, testenv.KafkaBrokers())
	pid, err := KafkaPid(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatalf("broker pid %d: %v", pid, err)
	}
	if !strings.Contains(string(cmdline), "-Dflashsale.kafka=single") {
		t.Errorf("pid %d runs %q, want the stack's one-node broker", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
}

// A node id the cluster does not have is refused before anything is
// killed, and the error says which script refused it.
func TestKillKafkaNodeRefusesUnknownNode(t *testing.T) {
	for _, id := range []int{0, 4} {
		t.Run(strconv.Itoa(id), func(t *testing.T) {
			pid, err := KillKafkaNode(testenv.Context(t), id)
			if err == nil || !strings.Contains(err.Error(), "kafka-cluster.sh kill-node") || !strings.Contains(err.Error(), "want 1, 2 or 3") {
				t.Errorf("KillKafkaNode(%d) = %d, %v; want an error from kafka-cluster.sh naming the valid ids", id, pid, err)
			}
		})
	}
}
