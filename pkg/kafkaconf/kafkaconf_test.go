package kafkaconf

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/pkg/config"
)

// Each FLASHSALE_KAFKA_* variable lands on its librdkafka property; the
// ones not set leave librdkafka's defaults alone.
func TestLoadMapsToLibrdkafka(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "sasl-password")
	if err := os.WriteFile(pwFile, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  config.Vars
		want map[string]string
	}{
		{"nothing set: plaintext, librdkafka's defaults", config.Vars{}, map[string]string{}},
		{"SASL over TLS", config.Vars{
			"FLASHSALE_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
			"FLASHSALE_KAFKA_SASL_MECHANISM":    "SCRAM-SHA-512",
			"FLASHSALE_KAFKA_SASL_USERNAME":     "ordersvc",
			"FLASHSALE_KAFKA_SASL_PASSWORD":     "s3cret",
			"FLASHSALE_KAFKA_SSL_CA_LOCATION":   "/etc/kafka/ca.pem",
		}, map[string]string{
			"security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "ordersvc",
			"sasl.password": "s3cret", "ssl.ca.location": "/etc/kafka/ca.pem",
		}},
		// the password from NAME_FILE, like every secret
		{"password from a file", config.Vars{
			"FLASHSALE_KAFKA_SECURITY_PROTOCOL":  "sasl_plaintext",
			"FLASHSALE_KAFKA_SASL_MECHANISM":     "PLAIN",
			"FLASHSALE_KAFKA_SASL_USERNAME":      "gw",
			"FLASHSALE_KAFKA_SASL_PASSWORD_FILE": pwFile,
		}, map[string]string{
			"security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN", "sasl.username": "gw", "sasl.password": "from-a-file",
		}},
		{"mutual TLS", config.Vars{
			"FLASHSALE_KAFKA_SECURITY_PROTOCOL":           "ssl",
			"FLASHSALE_KAFKA_SSL_CERTIFICATE_LOCATION":    "/etc/kafka/client.pem",
			"FLASHSALE_KAFKA_SSL_KEY_LOCATION":            "/etc/kafka/client.key",
			"FLASHSALE_KAFKA_SSL_KEY_PASSWORD":            "keypw",
			"FLASHSALE_KAFKA_SSL_ENDPOINT_IDENTIFICATION": "none",
		}, map[string]string{
			"security.protocol": "ssl", "ssl.certificate.location": "/etc/kafka/client.pem", "ssl.key.location": "/etc/kafka/client.key",
			"ssl.key.password": "keypw", "ssl.endpoint.identification.algorithm": "none",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := config.NewSource(tt.env)
			sec := Load(src)
			if err := src.Err(); err != nil {
				t.Fatal(err)
			}
			m := kafka.ConfigMap{"bootstrap.servers": "b:9092"}
			sec.Apply(m)
			for k, want := range tt.want {
				if got, _ := m.Get(k, nil); got != want {
					t.Errorf("%s = %v, want %q", k, got, want)
				}
			}
			if len(m) != len(tt.want)+1 {
				t.Errorf("config map %v has more than bootstrap.servers and %v", slices.Collect(maps.Keys(m)), tt.want)
			}
			if strings.Contains(strings.ToLower(sec.SASLPassword.String()), "s3cret") {
				t.Error("the password prints")
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		sec  Security
		want []string // variables named in the error; none: valid
	}{
		{"plaintext", Security{}, nil},
		{"unknown protocol", Security{Protocol: "tls"}, []string{"FLASHSALE_KAFKA_SECURITY_PROTOCOL"}},
		{"SASL without a SASL protocol", Security{SASLMechanism: "PLAIN", SASLUsername: "u", SASLPassword: []byte("p")},
			[]string{"FLASHSALE_KAFKA_SASL_MECHANISM"}},
		{"SCRAM without a password", Security{Protocol: "sasl_ssl", SASLMechanism: "SCRAM-SHA-256", SASLUsername: "u"},
			[]string{"FLASHSALE_KAFKA_SASL_USERNAME"}},
		{"unknown mechanism", Security{Protocol: "sasl_ssl", SASLMechanism: "MD5"}, []string{"FLASHSALE_KAFKA_SASL_MECHANISM"}},
		{"a CA without TLS", Security{CALocation: "/ca.pem"}, []string{"FLASHSALE_KAFKA_SSL_CA_LOCATION"}},
		{"certificate without key", Security{Protocol: "ssl", CertLocation: "/c.pem"}, []string{"FLASHSALE_KAFKA_SSL_CERTIFICATE_LOCATION"}},
		{"endpoint check misspelt", Security{Protocol: "ssl", EndpointVerify: "off"}, []string{"FLASHSALE_KAFKA_SSL_ENDPOINT_IDENTIFICATION"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.sec.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("valid settings refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want an error naming %v", tt.want)
			}
			for _, name := range tt.want {
				if !strings.Contains(err.Error(), name+":") {
					t.Errorf("error %q does not name %s", err, name)
				}
			}
		})
	}
}
