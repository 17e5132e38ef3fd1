package upstream

import (
	"context"

	"github.com/switchyard-mcp/switchyard/internal/taskid"
	"github.com/switchyard-mcp/switchyard/proto"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663): a
// tools/call may answer with a CreateTaskResult whose taskId the client
// then polls (tasks/get), feeds (tasks/update) or cancels (tasks/cancel).
// The upstream's task ids never reach the client: the worker replaces the
// taskId of a result with a gateway id bound to the client's scope
// (package taskid) and opens it again on the tasks/* requests, so a client
// reaches only the tasks created from its own session (or, statelessly,
// its own tenant and endpoint).

const (
	methodTasksGet    = "tasks/get"
	methodTasksUpdate = "tasks/update"
	methodTasksCancel = "tasks/cancel"
)

// isTaskMethod reports whether method is a tasks/* request that names a
// task by params.taskId.
func isTaskMethod(method string) bool {
	return method == methodTasksGet || method == methodTasksUpdate || method == methodTasksCancel
}

func scopeOf(req *proto.Request) string {
	return taskid.Scope(req.Tenant, req.Edge, req.Session, req.View)
}

// mintTaskID returns res, a tools/call result, with its top-level taskId
// (a CreateTaskResult's) replaced by the gateway id for req's scope;
// results without one are returned as they are (one byte search).
func (u *Upstream) mintTaskID(req *proto.Request, res []byte) []byte {
	c := u.opts.TaskIDs
	if c == nil {
		return res
	}
	scope := scopeOf(req)
	return taskid.Rewrite(res, func(id string) (string, bool) { return c.Mint(scope, u.name, id), true })
}

// taskRequest runs a tasks/get, tasks/update or tasks/cancel: the gateway
// id in params.taskId is opened under req's scope and replaced by the
// upstream's id (params and Mcp-Name), and the upstream's id in the result
// is replaced by the gateway id again. An id that does not open (unknown,
// forged, another scope's, another upstream's) is -32602, as SEP-2663
// answers a taskId the server does not recognize.
func (u *Upstream) taskRequest(ctx context.Context, req *proto.Request) ([]byte, *proto.Error) {
	gid, ok := taskid.Param(req.Params)
	if !ok {
		return nil, proto.Errorf(proto.CodeInvalidParams, "%s: params.taskId must be a string", req.Method)
	}
	var up, id string
	if c := u.opts.TaskIDs; c != nil {
		up, id, ok = c.Open(scopeOf(req), gid)
	}
	if !ok || up != u.name {
		return nil, proto.Errorf(proto.CodeInvalidParams, "%s: unknown taskId %q", req.Method, gid)
	}
	fwd := *req
	fwd.Params = taskid.Rewrite(req.Params, func(string) (string, bool) { return id, true })
	res, perr := u.request(ctx, &fwd)
	if perr != nil {
		return nil, perr
	}
	return taskid.Rewrite(res, func(got string) (string, bool) { return gid, got == id }), nil
}
