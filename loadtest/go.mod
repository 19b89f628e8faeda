module flashsale/loadtest

go 1.26.8
