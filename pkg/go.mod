module flashsale/pkg

go 1.26.8

replace flashsale/lua => ../lua

require (
	flashsale/lua v0.0.0-00010101000000-000000000000
	github.com/golang-jwt/jwt/v5 v5.3.1
	github.com/google/go-cmp v0.7.0
	github.com/google/uuid v1.6.0
	github.com/redis/rueidis v1.0.80
)

require golang.org/x/sys v0.50.0 // indirect
