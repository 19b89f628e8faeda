module flashsale/e2e

go 1.26.8

replace (
	flashsale/lua => ../lua
	flashsale/pkg => ../pkg
)

require (
	flashsale/pkg v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.5.5
)

require (
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20231201235250-de7065d80cb9 // indirect
	golang.org/x/crypto v0.46.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)
