package store

import (
	"context"

	"flashsale/pkg/event"
)

// PersistBatchChecked is PersistBatch without its fresh write: every batch
// written checked, the reference the fresh write must agree with.
func (s *Store) PersistBatchChecked(ctx context.Context, events []event.OrderPlaced) ([]Outcome, error) {
	out := make([]Outcome, len(events))
	uniq := dedupe(events, out)
	if len(uniq) == 0 {
		return out, nil
	}
	if err := s.persistChecked(ctx, events, uniq, out); err != nil {
		return nil, err
	}
	return out, nil
}
