module github.com/switchyard-mcp/switchyard/switchyard

go 1.26.8

replace github.com/switchyard-mcp/switchyard/proto => ../proto
replace github.com/switchyard-mcp/switchyard/internal => ../internal
replace github.com/switchyard-mcp/switchyard/testutil => ../testutil
replace github.com/switchyard-mcp/switchyard/edge => ../edge
replace github.com/switchyard-mcp/switchyard/router => ../router
replace github.com/switchyard-mcp/switchyard/upstream-worker => ../upstream-worker
replace github.com/switchyard-mcp/switchyard/tenancy-svc => ../tenancy-svc
