module vdso_time

go 1.21
