module serving-go-client

go 1.26
