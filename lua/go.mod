module flashsale/lua

go 1.26.8
