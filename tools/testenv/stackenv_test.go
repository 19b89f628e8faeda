package testenv

import (
	"strings"
	"testing"
)

// The tests reach the servers where deploy/stack.sh starts them: every
// port comes from deploy/stack.env unless the environment overrides it.
func TestAddressesComeFromStackEnv(t *testing.T) {
	for _, k := range []string{"FLASHSALE_REDIS_PORT", "FLASHSALE_PG_PORT", "FLASHSALE_KAFKA_PORT", "FLASHSALE_REDIS_CLUSTER_PORT", "FLASHSALE_KAFKA_CLUSTER_PORT"} {
		t.Setenv(k, "")
	}
	t.Setenv("FLASHSALE_REDIS_ADDR", "")
	t.Setenv("FLASHSALE_KAFKA_BROKERS", "")
	t.Setenv("FLASHSALE_PG_DSN", "")
	tests := []struct{ got, want string }{
		{RedisAddr(), "127.0.0.1:" + stackEnv["FLASHSALE_REDIS_PORT"]},
		{KafkaBrokers(), "127.0.0.1:" + stackEnv["FLASHSALE_KAFKA_PORT"]},
		{PostgresAddr(), "127.0.0.1:" + stackEnv["FLASHSALE_PG_PORT"]},
	}
	for _, tt := range tests {
		if strings.Contains(tt.got, "missing") || tt.got != tt.want || strings.HasSuffix(tt.want, ":") {
			t.Errorf("address %q, want %q (from deploy/stack.env)", tt.got, tt.want)
		}
	}
	t.Setenv("FLASHSALE_KAFKA_PORT", "29092")
	if got := KafkaBrokers(); got != "127.0.0.1:29092" {
		t.Errorf("with FLASHSALE_KAFKA_PORT=29092 the brokers are %q", got)
	}
	if got := KafkaClusterBrokers(); !strings.HasPrefix(got, "127.0.0.1:"+stackEnv["FLASHSALE_KAFKA_CLUSTER_PORT"]+",") {
		t.Errorf("cluster brokers %q do not start at deploy/stack.env's port", got)
	}
}
