module qrun.example/functionbench/hello_go

go 1.21
