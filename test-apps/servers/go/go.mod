module counter_http

go 1.21
