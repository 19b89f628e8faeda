package sale

import (
	"time"

	"flashsale/pkg/stock"
)

// SetBeforeRepairWrite runs f between a repair's decision and its write,
// where a test puts what happens meanwhile.
func SetBeforeRepairWrite(s *Service, f func()) { s.beforeWrite = f }

// SetHolderPacer makes the abandoned-reservation pass wait on p before
// each page of holders it reads.
func SetHolderPacer(s *Service, p stock.Pacer) { s.pace = p }

// ReadTime is how long a pass may spend reading n holders.
func ReadTime(s *Service, n int64) time.Duration { return s.readTime(n) }
