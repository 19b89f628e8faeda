// Package kafkaconf carries the broker connection's security settings
// (TLS, SASL) to every librdkafka client of the project (the gateway's
// producer, ordersvc's consumer, dead-letter producer and lag reader) in
// one place, so a client cannot be built without them. The settings are
// librdkafka's own (https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md),
// passed through as typed configuration.
package kafkaconf

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"flashsale/pkg/config"
	"flashsale/pkg/secret"
)

// Security is how a client authenticates to the brokers and protects the
// connection. The zero value is librdkafka's default: plaintext.
type Security struct {
	Protocol       string        // security.protocol: plaintext, ssl, sasl_plaintext, sasl_ssl
	SASLMechanism  string        // sasl.mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
	SASLUsername   string        // sasl.username
	SASLPassword   secret.Secret // sasl.password
	CALocation     string        // ssl.ca.location: CA certificate(s) to verify the brokers
	CertLocation   string        // ssl.certificate.location: client certificate (mutual TLS)
	KeyLocation    string        // ssl.key.location: the client certificate's key
	KeyPassword    secret.Secret // ssl.key.password
	EndpointVerify string        // ssl.endpoint.identification.algorithm: https (default) or none
}

var (
	protocols  = []string{"plaintext", "ssl", "sasl_plaintext", "sasl_ssl"}
	mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"}
)

// Settings are the librdkafka properties s sets (only those given, so a
// client keeps librdkafka's defaults for the rest).
func (s Security) Settings() map[string]string {
	out := map[string]string{}
	for k, v := range map[string]string{
		"security.protocol":                     s.Protocol,
		"sasl.mechanisms":                       s.SASLMechanism,
		"sasl.username":                         s.SASLUsername,
		"sasl.password":                         string(s.SASLPassword),
		"ssl.ca.location":                       s.CALocation,
		"ssl.certificate.location":              s.CertLocation,
		"ssl.key.location":                      s.KeyLocation,
		"ssl.key.password":                      string(s.KeyPassword),
		"ssl.endpoint.identification.algorithm": s.EndpointVerify,
	} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// Apply adds s's settings to a client's configuration.
func (s Security) Apply(m kafka.ConfigMap) {
	for k, v := range s.Settings() {
		m[k] = v
	}
}

// Validate reports every inconsistency at once, each naming its
// variable.
func (s Security) Validate() error {
	var errs []error
	s.check(func(name string, err error) { errs = append(errs, fmt.Errorf("%s: %w", name, err)) })
	return errors.Join(errs...)
}

// check calls report with the variable and the problem of each
// inconsistency.
func (s Security) check(report func(name string, err error)) {
	fail := func(name, format string, args ...any) {
		report(name, fmt.Errorf(format, args...))
	}
	proto := strings.ToLower(s.Protocol)
	if s.Protocol != "" && !slices.Contains(protocols, proto) {
		fail("FLASHSALE_KAFKA_SECURITY_PROTOCOL", "want one of %s, got %q", strings.Join(protocols, ", "), s.Protocol)
	}
	sasl := strings.HasPrefix(proto, "sasl_")
	if s.SASLMechanism != "" && !slices.Contains(mechanisms, strings.ToUpper(s.SASLMechanism)) {
		fail("FLASHSALE_KAFKA_SASL_MECHANISM", "want one of %s, got %q", strings.Join(mechanisms, ", "), s.SASLMechanism)
	}
	if !sasl && (s.SASLMechanism != "" || s.SASLUsername != "" || s.SASLPassword.Set()) {
		fail("FLASHSALE_KAFKA_SASL_MECHANISM", "SASL settings need FLASHSALE_KAFKA_SECURITY_PROTOCOL sasl_plaintext or sasl_ssl")
	}
	if mech := strings.ToUpper(s.SASLMechanism); sasl && (strings.HasPrefix(mech, "SCRAM") || mech == "PLAIN") {
		if s.SASLUsername == "" || !s.SASLPassword.Set() {
			fail("FLASHSALE_KAFKA_SASL_USERNAME", "%s needs a username and FLASHSALE_KAFKA_SASL_PASSWORD", s.SASLMechanism)
		}
	}
	tls := proto == "ssl" || proto == "sasl_ssl"
	if !tls && (s.CALocation != "" || s.CertLocation != "" || s.KeyLocation != "" || s.KeyPassword.Set() || s.EndpointVerify != "") {
		fail("FLASHSALE_KAFKA_SSL_CA_LOCATION", "TLS settings need FLASHSALE_KAFKA_SECURITY_PROTOCOL ssl or sasl_ssl")
	}
	if (s.CertLocation == "") != (s.KeyLocation == "") {
		fail("FLASHSALE_KAFKA_SSL_CERTIFICATE_LOCATION", "a client certificate needs its key (FLASHSALE_KAFKA_SSL_KEY_LOCATION) and the other way round")
	}
	if s.EndpointVerify != "" && s.EndpointVerify != "https" && s.EndpointVerify != "none" {
		fail("FLASHSALE_KAFKA_SSL_ENDPOINT_IDENTIFICATION", "want https or none, got %q", s.EndpointVerify)
	}
}

// Load reads the Kafka security variables (the passwords also
// from NAME_FILE) and records their problems on src.
func Load(src *config.Source) Security {
	s := Security{
		Protocol:       src.String("FLASHSALE_KAFKA_SECURITY_PROTOCOL", ""),
		SASLMechanism:  src.String("FLASHSALE_KAFKA_SASL_MECHANISM", ""),
		SASLUsername:   src.String("FLASHSALE_KAFKA_SASL_USERNAME", ""),
		SASLPassword:   src.Secret("FLASHSALE_KAFKA_SASL_PASSWORD"),
		CALocation:     src.String("FLASHSALE_KAFKA_SSL_CA_LOCATION", ""),
		CertLocation:   src.String("FLASHSALE_KAFKA_SSL_CERTIFICATE_LOCATION", ""),
		KeyLocation:    src.String("FLASHSALE_KAFKA_SSL_KEY_LOCATION", ""),
		KeyPassword:    src.Secret("FLASHSALE_KAFKA_SSL_KEY_PASSWORD"),
		EndpointVerify: src.String("FLASHSALE_KAFKA_SSL_ENDPOINT_IDENTIFICATION", ""),
	}
	s.check(src.Fail)
	return s
}
