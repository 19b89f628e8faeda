package stackctl

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"flashsale/tools/testenv"
)

// A KRaft cluster id never starts with '-': kafka-storage reads such an id
// as an option and the node is never formatted (one random id in 64 did,
// and a fresh clone's `make test` failed on it). An id file left with such
// an id is replaced; a good one is kept, so a formatted node keeps its id.
func TestKafkaClusterIDNeverLooksLikeAnOption(t *testing.T) {
	root, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	stack := t.TempDir()
	// 300 fresh ids (the old generator gave a bad one 99 times in 100 over
	// as many), then a bad file replaced and a good one kept.
	script := `source deploy/stack/kafka-node.sh
for i in $(seq 300); do rm -f "$KAFKA_ROOT/single.cluster-id"; kafka_cluster_id single; echo; done
printf %s -bad >"$KAFKA_ROOT/single.cluster-id"; kafka_cluster_id single; echo
kafka_cluster_id single; echo`
	cmd := exec.CommandContext(testenv.Context(t), "bash", "-c", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "FLASHSALE_STACK_DIR="+stack)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ids := strings.Fields(string(out))
	if len(ids) != 302 {
		t.Fatalf("%d ids, want 302:\n%s", len(ids), out)
	}
	for _, id := range ids {
		if strings.HasPrefix(id, "-") || len(id) != 22 {
			t.Fatalf("cluster id %q: want 22 base64url characters, not starting with '-'", id)
		}
	}
	if ids[300] == "-bad" || ids[301] != ids[300] {
		t.Fatalf("after a bad id file: %q then %q; want a new id, then the same one", ids[300], ids[301])
	}
	if b, _ := os.ReadFile(filepath.Join(stack, "kafka", "single.cluster-id")); string(b) != ids[301] {
		t.Fatalf("id file holds %q, want %q", b, ids[301])
	}
}
