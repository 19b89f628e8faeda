package accepted_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"flashsale/pkg/accepted"
	"flashsale/tools/testenv"
)

func TestRecordAndOwner(t *testing.T) {
	testenv.Require(t, testenv.RedisAddr())
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testenv.Context(t)
	id := uuid.NewString()
	if _, ok, err := accepted.Owner(ctx, c, id); ok || err != nil {
		t.Fatalf("unknown order: ok=%v err=%v, want not found", ok, err)
	}
	if err := accepted.Record(ctx, c, id, "alice"); err != nil {
		t.Fatal(err)
	}
	user, ok, err := accepted.Owner(ctx, c, id)
	if err != nil || !ok || user != "alice" {
		t.Fatalf("Owner = %q %v %v, want alice", user, ok, err)
	}
}
