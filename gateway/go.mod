module flashsale/gateway

go 1.26.8
