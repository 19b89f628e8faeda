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

// Only failures a failover explains are retried, and a repair only when
// they prove nothing was written; never a verdict, a lagging consumer, a
// busy sale or bad input.
func TestTransientRedis(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err          error
		repair, want bool
	}{
		{nil, false, false},
		{fmt.Errorf("reconcile sale 1: %w", refused), true, true},
		{fmt.Errorf("read holders: %w", io.EOF), false, true},
		{fmt.Errorf("read holders: %w", io.EOF), true, false}, // cut mid-repair: its write may have landed
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true, false},
		{fmt.Errorf("reconcile sale 1: %w", stock.ErrBusy), false, false},
		{fmt.Errorf("repair: %w", ErrInvalid), true, false},
		{errors.New("something else"), false, false},
	} {
		if got := transientRedis(c.err, c.repair); got != c.want {
			t.Errorf("transientRedis(%v, repair=%v) = %v, want %v", c.err, c.repair, got, c.want)
		}
	}
}
