module github.com/switchyard-mcp/switchyard/edge

go 1.26.8

replace github.com/switchyard-mcp/switchyard/proto => ../proto
replace github.com/switchyard-mcp/switchyard/internal => ../internal
replace github.com/switchyard-mcp/switchyard/testutil => ../testutil
