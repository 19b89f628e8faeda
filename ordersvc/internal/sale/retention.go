package sale

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// DefaultRetention is how long a sale's copy in Redis outlives the last
// order that could still change it (FLASHSALE_HOT_COPY_RETENTION): a
// week, as long as a sale's spent admission tokens were kept before, for
// an operator to read the copy or compare it with PostgreSQL.
const DefaultRetention = 7 * 24 * time.Hour

// retiredLookback is how long after its copy's time a sale is still
// listed: a copy loaded again since (a reload, a repair of an old sale),
// or one from before these expiries, is dropped then (PEXPIREAT in the
// past), not kept for good.
const retiredLookback = 30 * 24 * time.Hour

// ExpireHotCopies gives every sale's copy in Redis its expiry: the sale's
// end, its payment window (the last order it accepted ends by then), the
// in-flight window (an order still in Kafka) and retention. It returns
// how many sales it reached. A copy past that time reads as not loaded
// (the gateways show its stock as unknown, and "my order" reads
// PostgreSQL); one loaded again within retiredLookback after it is
// dropped at the next pass.
func (s *Service) ExpireHotCopies(ctx context.Context, now time.Time, retention time.Duration) (int, error) {
	// Once the in-flight window after its payment window has passed too:
	// until then the sale's keys keep no expiry.
	sales, err := s.store.HotCopyExpiries(ctx, now.Add(-retiredLookback), now.Add(-s.window), s.window+retention)
	if err != nil {
		return 0, err
	}
	done := 0
	var errs []error
	for _, e := range sales {
		if err := s.stock.ExpireSale(ctx, e.SaleID, e.Items, e.At); err != nil {
			errs = append(errs, err) // one sale's failure leaves the others' expiry to be set
			continue
		}
		done++
	}
	return done, errors.Join(errs...)
}

// WatchRetention runs ExpireHotCopies every interval until ctx ends. A
// pass that fails is logged and tried again at the next: keys without an
// expiry only stay longer.
func (s *Service) WatchRetention(ctx context.Context, interval, retention time.Duration, log *slog.Logger) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		c, cancel := context.WithTimeout(ctx, interval)
		_, err := s.ExpireHotCopies(c, time.Now(), retention)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.Warn("sales' copies in Redis not given their expiry; tried again next pass", "err", err)
		}
	}
}
