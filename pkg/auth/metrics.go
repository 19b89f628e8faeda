package auth

import "github.com/prometheus/client_golang/prometheus"

// Collector exports how many tokens each verification path decided, as
// <namespace>_tokens_verified_total{path="fast"|"parser"}. The fast path
// takes the HS256 tokens of the shape MintHS256 writes; an identity
// provider that writes its header otherwise (its keys in another order, a
// "kid") sends every token to golang-jwt's parser, about four times the
// CPU per verification (BenchmarkUserID), and this is where it shows.
func (v *Verifier) Collector(namespace string) prometheus.Collector {
	return &pathCollector{v: v, desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "tokens_verified_total"),
		"Bearer tokens verified, accepted or refused, by path: fast for HS256 tokens in the shape minted here, parser for the rest (golang-jwt's full decoding).",
		[]string{"path"}, nil)}
}

type pathCollector struct {
	v    *Verifier
	desc *prometheus.Desc
}

func (c *pathCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *pathCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.v.byFastPath.Load()), "fast")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.v.byParser.Load()), "parser")
}
