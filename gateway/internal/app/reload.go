package app

import (
	"flashsale/gateway/internal/config"
	"flashsale/gateway/internal/ratelimit"
)

// limitSettings are the five rate limits as a configuration sets them, in
// the order of limitNames.
type limitSettings [5]ratelimit.Rule

var limitNames = [5]string{"FLASHSALE_LIMIT_PURCHASE_USER", "FLASHSALE_LIMIT_PURCHASE_IP",
	"FLASHSALE_LIMIT_QUEUE_USER", "FLASHSALE_LIMIT_QUEUE_IP", "FLASHSALE_LIMIT_POLL_USER"}

func limitsOf(c config.Config) limitSettings {
	return limitSettings{c.LimitPurchaseUser, c.LimitPurchaseIP, c.LimitQueueUser, c.LimitQueueIP, c.LimitPollUser}
}

// reloadLimits is the rule of a reload for limits: the configuration's
// rule is applied to a limiter only when it differs from the one the last
// load read (prev), because only then did the operator edit it; otherwise
// the live rule stays, which may have been set through PUT /admin/limits
// during a sale and must not be undone by a reload meant for another
// setting. It returns the names of the limits applied and of those kept.
func reloadLimits(limiters [5]*ratelimit.Limiter, prev, next limitSettings) (applied, kept []string) {
	for i, l := range limiters {
		if next[i] == prev[i] {
			if l.Rule() != next[i] {
				kept = append(kept, limitNames[i])
			}
			continue
		}
		l.SetRule(next[i])
		applied = append(applied, limitNames[i])
	}
	return applied, kept
}
