module flashsale/ordersvc

go 1.26.8
