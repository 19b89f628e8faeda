package lua

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// Every script compiles in the real Redis (SCRIPT LOAD), so a syntax error
// fails here, not during a sale. Plain RESP over TCP keeps this module free
// of dependencies.
func TestScriptsLoadInRedis(t *testing.T) {
	addr := os.Getenv("FLASHSALE_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:16379"
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("redis %s does not answer (%v): run `make up`", addr, err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	scripts := map[string]string{"reserve": Reserve, "release": Release, "load": Load,
		"queue_join": QueueJoin, "queue_status": QueueStatus, "queue_advance": QueueAdvance, "queue_size": QueueSize,
		"move_take": MoveTake, "move_give": MoveGive, "slot_read": SlotRead, "pause": Pause}
	for name, src := range scripts {
		t.Run(name, func(t *testing.T) {
			if strings.TrimSpace(src) == "" {
				t.Fatal("empty script")
			}
			fmt.Fprintf(c, "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$%d\r\n%s\r\n", len(src), src)
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(line, "-") {
				t.Fatalf("SCRIPT LOAD: %s", strings.TrimSpace(line))
			}
			if strings.HasPrefix(line, "$") { // the SHA1 follows
				if _, err := r.ReadString('\n'); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
