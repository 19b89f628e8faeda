module flashsale/benchmarks

go 1.26.8
