package purchase

import "github.com/prometheus/client_golang/prometheus"

// held is how many orders Buy kept reserved that are still to be settled.
func (b *Buyer) held() int { return len(b.unsettled) + int(b.settlesBackingOff.Load()) }

// pendingReleases is how many failed purchases' units are still to be given back.
func (b *Buyer) pendingReleases() int { return len(b.retries) + int(b.releasesBackingOff.Load()) }

var (
	descHeld = prometheus.NewDesc("flashsale_gateway_held_orders",
		"Orders whose publish the broker did not confirm and PostgreSQL could not settle yet; their units stay reserved while the gateway settles them again.", nil, nil)
	descPendingReleases = prometheus.NewDesc("flashsale_gateway_pending_releases",
		"Units of failed purchases Redis has not taken back yet, retried with backoff.", nil, nil)
	descReserveFailed = prometheus.NewDesc("flashsale_gateway_reserve_failures_total",
		"Reservations that failed for a reason other than the shopper's (Redis unreachable, a timeout, a script error), each answered 503; the log names the cause at most once a second.", nil, nil)
	descStranded = prometheus.NewDesc("flashsale_gateway_reservations_stranded_total",
		"Reservations the gateway gave up releasing or settling (queue full, attempts spent): units reserved until a reconcile repair or the order service's abandoned-reservation pass.", nil, nil)
)

// Describe and Collect make the buyer a prometheus.Collector of its queues.
func (b *Buyer) Describe(ch chan<- *prometheus.Desc) {
	ch <- descHeld
	ch <- descPendingReleases
	ch <- descReserveFailed
	ch <- descStranded
}

// Collect reads the queues as they are now.
func (b *Buyer) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(b.held()))
	ch <- prometheus.MustNewConstMetric(descPendingReleases, prometheus.GaugeValue, float64(b.pendingReleases()))
	ch <- prometheus.MustNewConstMetric(descReserveFailed, prometheus.CounterValue, float64(b.reserveFailures.Load()))
	ch <- prometheus.MustNewConstMetric(descStranded, prometheus.CounterValue, float64(b.stranded.Load()))
}
