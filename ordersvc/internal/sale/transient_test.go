package sale

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"flashsale/pkg/stock"
)

// Only failures a failover or reconnect explains are retried: never a
// verdict, a lagging consumer, a busy sale or bad input.
func TestTransientRedis(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("reconcile sale 1: %w", refused), true},
		{fmt.Errorf("read holders: %w", io.EOF), true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{fmt.Errorf("reconcile sale 1: %w", stock.ErrBusy), false},
		{fmt.Errorf("repair: %w", ErrInvalid), false},
		{errors.New("something else"), false},
	} {
		if got := transientRedis(c.err); got != c.want {
			t.Errorf("transientRedis(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
