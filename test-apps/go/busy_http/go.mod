module busy_http

go 1.21
