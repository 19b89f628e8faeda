package queue

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
)

// bypassKey is the set of users who need no admission token (test
// accounts, support staff), shared by every gateway.
const bypassKey = "fs:queue:bypass"

// Bypass is the shared bypass list.
type Bypass struct{ client rueidis.Client }

// NewBypass wraps a client.
func NewBypass(c rueidis.Client) *Bypass { return &Bypass{client: c} }

// Change adds and removes users and returns the whole list.
func (b *Bypass) Change(ctx context.Context, add, remove []string) ([]string, error) {
	var cmds rueidis.Commands
	if len(add) > 0 {
		cmds = append(cmds, b.client.B().Sadd().Key(bypassKey).Member(add...).Build())
	}
	if len(remove) > 0 {
		cmds = append(cmds, b.client.B().Srem().Key(bypassKey).Member(remove...).Build())
	}
	for _, r := range b.client.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return nil, fmt.Errorf("change bypass list: %w", err)
		}
	}
	return b.List(ctx)
}

// List returns every bypass user.
func (b *Bypass) List(ctx context.Context) ([]string, error) {
	users, err := b.client.Do(ctx, b.client.B().Smembers().Key(bypassKey).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("read bypass list: %w", err)
	}
	return users, nil
}
