module flashsale/deploy/kafka

go 1.26.8

replace (
	flashsale/pkg => ../../pkg
	flashsale/tools => ../../tools
)

require (
	flashsale/tools v0.0.0-00010101000000-000000000000
	github.com/confluentinc/confluent-kafka-go/v2 v2.11.1
)

require (
	flashsale/pkg v0.0.0-00010101000000-000000000000 // indirect
	github.com/redis/rueidis v1.0.80 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
