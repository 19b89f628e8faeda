package sale

// SetBeforeRepairWrite runs f between a repair's decision and its write,
// where a test puts what happens meanwhile.
func SetBeforeRepairWrite(s *Service, f func()) { s.beforeWrite = f }
