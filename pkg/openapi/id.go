package openapi

// MaxIDLen is the most digits a positive int64 has.
const MaxIDLen = 19

// ParseID reads an id from a path: a positive int64 in canonical decimal
// (the document's pattern ^[1-9][0-9]{0,18}$). Leading zeros, signs and
// spaces are refused, so each sale and item has exactly one URL: a CDN or
// an edge limit keyed by path would otherwise count "/01/" and "/1/" apart.
// It does not allocate.
func ParseID[T ~string | ~[]byte](s T) (int64, bool) {
	if len(s) == 0 || len(s) > MaxIDLen || s[0] == '0' {
		return 0, false
	}
	var n int64
	for i := range len(s) {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
