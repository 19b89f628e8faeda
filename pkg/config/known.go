package config

import (
	"fmt"
	"slices"
	"strings"
)

// Reader is a set of the project's programs that read a variable.
type Reader uint8

const (
	// Gateway is gateway/internal/config.
	Gateway Reader = 1 << iota
	// Ordersvc is ordersvc/internal/config.
	Ordersvc
	// Tools are loadtest and the benchmark commands.
	Tools
	// Stack is everything else: deploy/*.sh, the Makefile, tools/testenv,
	// the test harnesses and the browser tests. It never reads the file.
	Stack

	// loaders read the FLASHSALE_CONFIG file through a Source.
	loaders  = Gateway | Ordersvc | Tools
	services = Gateway | Ordersvc
)

type variable struct {
	readers Reader
	// secret: NAME_FILE is read too (Source.Secret).
	secret bool
}

// known is every FLASHSALE_* variable a program of the project reads. The
// gateway and ordersvc are started with one shared environment (demo.sh,
// tools/harness), the test stack's variables sit in the same shells, so a
// binary must tolerate its siblings' names and reject only names nothing
// reads. Tests keep this list true: each loader's test compares what it
// reads with ReadBy, and known_test.go compares the list with the names
// the repository's code and scripts use.
var known = map[string]variable{
	"FLASHSALE_CONFIG": {readers: loaders},

	// Both services.
	"FLASHSALE_REDIS_ADDR":          {readers: services | Tools | Stack},
	"FLASHSALE_PG_DSN":              {readers: services | Tools | Stack},
	"FLASHSALE_KAFKA_BROKERS":       {readers: services | Stack},
	"FLASHSALE_ORDERS_TOPIC":        {readers: services},
	"FLASHSALE_JWT_HS256_KEY":       {readers: services | Tools, secret: true},
	"FLASHSALE_JWT_ISSUER":          {readers: services | Tools},
	"FLASHSALE_ADMIN_TOKEN":         {readers: services | Tools, secret: true},
	"FLASHSALE_ORDERSVC_ADDR":       {readers: services},
	"FLASHSALE_ORDERSVC_ADMIN_ADDR": {readers: services},
	"FLASHSALE_SHUTDOWN_TIMEOUT":    {readers: services},
	"FLASHSALE_LOG_LEVEL":           {readers: services},
	"FLASHSALE_LOG_FORMAT":          {readers: services},
	"FLASHSALE_CPU_PROFILE":         {readers: services},
	"FLASHSALE_ALLOC_PROFILE":       {readers: services},
	// The HTTP listeners (pkg/httpserver).
	"FLASHSALE_READ_TIMEOUT":  {readers: services},
	"FLASHSALE_WRITE_TIMEOUT": {readers: services},
	"FLASHSALE_IDLE_TIMEOUT":  {readers: services},
	"FLASHSALE_CONCURRENCY":   {readers: services},
	// The brokers' security (pkg/kafkaconf).
	"FLASHSALE_KAFKA_SECURITY_PROTOCOL":           {readers: services},
	"FLASHSALE_KAFKA_SASL_MECHANISM":              {readers: services},
	"FLASHSALE_KAFKA_SASL_USERNAME":               {readers: services},
	"FLASHSALE_KAFKA_SASL_PASSWORD":               {readers: services, secret: true},
	"FLASHSALE_KAFKA_SSL_CA_LOCATION":             {readers: services},
	"FLASHSALE_KAFKA_SSL_CERTIFICATE_LOCATION":    {readers: services},
	"FLASHSALE_KAFKA_SSL_KEY_LOCATION":            {readers: services},
	"FLASHSALE_KAFKA_SSL_KEY_PASSWORD":            {readers: services, secret: true},
	"FLASHSALE_KAFKA_SSL_ENDPOINT_IDENTIFICATION": {readers: services},

	// The gateway.
	"FLASHSALE_GATE_KEY":                {readers: Gateway, secret: true},
	"FLASHSALE_GATEWAY_ADDR":            {readers: Gateway},
	"FLASHSALE_GATEWAY_ADMIN_ADDR":      {readers: Gateway},
	"FLASHSALE_REUSEPORT":               {readers: Gateway},
	"FLASHSALE_REDIS_TIMEOUT":           {readers: Gateway},
	"FLASHSALE_REDIS_FLUSH_DELAY":       {readers: Gateway},
	"FLASHSALE_REDIS_CONNS":             {readers: Gateway},
	"FLASHSALE_PUBLISH_TIMEOUT":         {readers: Gateway},
	"FLASHSALE_PUBLISH_LINGER":          {readers: Gateway},
	"FLASHSALE_PUBLISH_FAIL_FAST_AFTER": {readers: Gateway},
	"FLASHSALE_PUBLISH_FAIL_FAST_FOR":   {readers: Gateway},
	"FLASHSALE_PUBLISH_SPREAD":          {readers: Gateway},
	"FLASHSALE_SETTLE_TIMEOUT":          {readers: Gateway},
	"FLASHSALE_LIMIT_PURCHASE_USER":     {readers: Gateway},
	"FLASHSALE_LIMIT_PURCHASE_IP":       {readers: Gateway},
	"FLASHSALE_LIMIT_QUEUE_USER":        {readers: Gateway},
	"FLASHSALE_LIMIT_QUEUE_IP":          {readers: Gateway},
	"FLASHSALE_LIMIT_POLL_USER":         {readers: Gateway},
	"FLASHSALE_LIMIT_MAX_KEYS":          {readers: Gateway},
	"FLASHSALE_TRUSTED_PROXIES":         {readers: Gateway},
	"FLASHSALE_QUEUE_GRACE":             {readers: Gateway},
	"FLASHSALE_QUEUE_ADVANCE":           {readers: Gateway},
	"FLASHSALE_ADMISSION_TTL":           {readers: Gateway},
	"FLASHSALE_QUEUE_BYPASS":            {readers: Gateway},
	"FLASHSALE_POW_CHALLENGE_TTL":       {readers: Gateway},
	"FLASHSALE_CATALOG_REFRESH":         {readers: Gateway},
	"FLASHSALE_STOCK_POLL":              {readers: Gateway},
	"FLASHSALE_MAX_CONNS_PER_IP":        {readers: Gateway},
	"FLASHSALE_MAX_BODY_BYTES":          {readers: Gateway},

	// The order service.
	"FLASHSALE_DLQ_TOPIC":                     {readers: Ordersvc},
	"FLASHSALE_KAFKA_ALLOW_WEAK_TOPIC":        {readers: Ordersvc},
	"FLASHSALE_CONSUMER_GROUP":                {readers: Ordersvc},
	"FLASHSALE_BATCH_SIZE":                    {readers: Ordersvc},
	"FLASHSALE_BATCH_WAIT":                    {readers: Ordersvc},
	"FLASHSALE_FETCH_WAIT":                    {readers: Ordersvc},
	"FLASHSALE_RELAY_INTERVAL":                {readers: Ordersvc},
	"FLASHSALE_EXPIRY_INTERVAL":               {readers: Ordersvc},
	"FLASHSALE_EXPIRY_BATCH":                  {readers: Ordersvc},
	"FLASHSALE_RECONCILE_CATCHUP_TIMEOUT":     {readers: Ordersvc},
	"FLASHSALE_RECONCILE_INTERVAL":            {readers: Ordersvc},
	"FLASHSALE_LAG_INTERVAL":                  {readers: Ordersvc},
	"FLASHSALE_INFLIGHT_WINDOW":               {readers: Ordersvc | Gateway},
	"FLASHSALE_ABANDON_INTERVAL":              {readers: Ordersvc},
	"FLASHSALE_ABANDON_READ_RATE":             {readers: Ordersvc},
	"FLASHSALE_HOT_COPY_RETENTION":            {readers: Ordersvc},
	"FLASHSALE_PAYMENT_WEBHOOK_SECRET":        {readers: Ordersvc, secret: true},
	"FLASHSALE_PUBLIC_PAY":                    {readers: Ordersvc},
	"FLASHSALE_ORDERSVC_MAX_BODY_BYTES":       {readers: Ordersvc},
	"FLASHSALE_ORDERSVC_ADMIN_MAX_BODY_BYTES": {readers: Ordersvc},

	// The local stack and the tests (deploy/stack.sh usage lists them).
	"FLASHSALE_STACK_DIR":          {readers: Stack},
	"FLASHSALE_STACK_WAIT":         {readers: Stack},
	"FLASHSALE_REDIS_PORT":         {readers: Stack},
	"FLASHSALE_PG_PORT":            {readers: Stack},
	"FLASHSALE_KAFKA_PORT":         {readers: Stack},
	"FLASHSALE_KAFKA_CLUSTER_PORT": {readers: Stack},
	"FLASHSALE_KAFKA_PARTITIONS":   {readers: Stack},
	"FLASHSALE_KAFKA_HEAP":         {readers: Stack},
	"FLASHSALE_KAFKA_JVM_FLAGS":    {readers: Stack},
	"FLASHSALE_KAFKA_WAIT":         {readers: Stack},
	"FLASHSALE_CLUSTER":            {readers: Stack},
	"FLASHSALE_REDIS_CLUSTER":      {readers: Stack},
	"FLASHSALE_REDIS_CLUSTER_PORT": {readers: Stack},
	"FLASHSALE_REDIS_CLUSTER_ADDR": {readers: Stack},
	"FLASHSALE_PROMETHEUS_PORT":    {readers: Stack},
	"FLASHSALE_TEST_LOGS":          {readers: Stack},
	"FLASHSALE_CHROMIUM":           {readers: Stack},
}

// ReadBy lists the variables any of r reads (a secret's NAME_FILE is
// implied by its NAME and not listed).
func ReadBy(r Reader) map[string]bool {
	out := map[string]bool{}
	for k, v := range known {
		if v.readers&r != 0 {
			out[k] = true
		}
	}
	return out
}

// readers returns who reads name, counting NAME_FILE as its secret's NAME.
func readers(name string) Reader {
	if v, ok := known[name]; ok {
		return v.readers
	}
	if base, ok := strings.CutSuffix(name, "_FILE"); ok && known[base].secret {
		return known[base].readers
	}
	return 0
}

// candidates are the names a misspelling of a name read by r may be meant
// as, with the secrets' NAME_FILE forms.
func candidates(r Reader) []string {
	var out []string
	for k, v := range known {
		if v.readers&r == 0 {
			continue
		}
		out = append(out, k)
		if v.secret {
			out = append(out, k+"_FILE")
		}
	}
	slices.Sort(out)
	return out
}

// RejectUnknown records a problem for each key of the config file that no
// loader reads, and each FLASHSALE_* variable of the environment that no
// program of the project reads, with the known name it probably means.
func (s *Source) RejectUnknown() {
	for _, k := range sortedKeys(s.file) {
		if readers(k)&loaders == 0 {
			s.Fail(k, fmt.Errorf("unknown key in %s: no flashsale program reads it%s", s.filePath, suggest(k, candidates(loaders))))
		}
	}
	for _, k := range s.env.Names() {
		if strings.HasPrefix(k, "FLASHSALE_") && readers(k) == 0 {
			s.Fail(k, fmt.Errorf("unknown variable: no flashsale program reads it%s", suggest(k, candidates(^Reader(0)))))
		}
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// suggest names the one candidate close to name: within an edit distance
// of a fifth of its length (at least 2), or name itself with the
// FLASHSALE_ prefix it lacks. Two equally close candidates are no answer.
func suggest(name string, cands []string) string {
	if p := "FLASHSALE_" + name; slices.Contains(cands, p) {
		return fmt.Sprintf(" (did you mean %s?)", p)
	}
	best, bestD, tie := "", max(2, len(name)/5)+1, false
	for _, c := range cands {
		switch d := distance(name, c); {
		case d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD:
			tie = true
		}
	}
	if best == "" || tie {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// distance is the Levenshtein distance between a and b (bytes: the names
// are ASCII).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
