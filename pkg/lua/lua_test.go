package lua_test

import (
	"strings"
	"testing"

	"flashsale/pkg/lua"
	"flashsale/tools/testenv"
)

// Every script compiles in the real Redis (SCRIPT LOAD), so a syntax error
// fails here, not during a sale.
func TestScriptsLoadInRedis(t *testing.T) {
	addr := testenv.RedisAddr()
	testenv.Require(t, addr)
	c := testenv.RedisClient(t, addr)
	ctx := testenv.Context(t)
	scripts := map[string]string{"reserve": lua.Reserve, "release": lua.Release, "load": lua.Load,
		"queue_join": lua.QueueJoin, "queue_status": lua.QueueStatus, "queue_advance": lua.QueueAdvance, "queue_size": lua.QueueSize,
		"move_take": lua.MoveTake, "move_give": lua.MoveGive, "slot_read": lua.SlotRead, "pause": lua.Pause, "holders_state": lua.HoldersState}
	for name, src := range scripts {
		t.Run(name, func(t *testing.T) {
			if strings.TrimSpace(src) == "" {
				t.Fatal("empty script")
			}
			if err := c.Do(ctx, c.B().ScriptLoad().Script(src).Build()).Error(); err != nil {
				t.Fatalf("SCRIPT LOAD: %v", err)
			}
		})
	}
}
