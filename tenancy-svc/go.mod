module github.com/switchyard-mcp/switchyard/tenancy-svc

go 1.26.8

replace github.com/switchyard-mcp/switchyard/proto => ../proto

replace github.com/switchyard-mcp/switchyard/internal => ../internal

replace github.com/switchyard-mcp/switchyard/testutil => ../testutil

require github.com/switchyard-mcp/switchyard/testutil v0.0.0-00010101000000-000000000000

require (
	github.com/nats-io/nats.go v1.55.0
	github.com/switchyard-mcp/switchyard/internal v0.0.0-00010101000000-000000000000
	github.com/switchyard-mcp/switchyard/proto v0.0.0-00010101000000-000000000000
)

require (
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
