module flashsale/e2e

go 1.26.8
