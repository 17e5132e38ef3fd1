package upstream

import (
	"bytes"
	"context"
	"strings"

	"github.com/switchyard-mcp/switchyard/internal/taskid"
	"github.com/switchyard-mcp/switchyard/proto"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663): a
// tools/call may answer with a CreateTaskResult whose taskId the client
// then polls (tasks/get), feeds (tasks/update) or cancels (tasks/cancel).
// The upstream's task ids never reach the client: the worker replaces the
// taskId of a result with a sealed gateway id bound to the client's scope
// (package taskid) and opens it again on the tasks/* requests, so a client
// reaches only the tasks it created itself (its tenant, JWT issuer and
// principal), from its own session (or, statelessly, its own endpoint).

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

// scopeOf is the scope req's tasks belong to: who sent it (as the edge
// authenticated it) and from where.
func scopeOf(req *proto.Request) taskid.Scope {
	return taskid.Scope{Tenant: req.Tenant, Issuer: req.Issuer, Principal: req.Principal,
		Edge: req.Edge, Session: req.Session, View: req.View}
}

// mintTaskID returns res, a tools/call result, with its taskId (a
// CreateTaskResult's, top-level or, in the 2025-11-25 shape, under "task")
// replaced by a gateway id for req's scope; results without one are
// returned as they are (one byte search). A taskId that is not a string
// is a malformed result (-32603), never shown as is.
func (u *Upstream) mintTaskID(req *proto.Request, res []byte) ([]byte, *proto.Error) {
	c := u.opts.TaskIDs
	if c == nil {
		return res, nil
	}
	scope := scopeOf(req)
	out, err := taskid.Rewrite(res, func(id string) string { return c.Mint(scope, u.name, id) }, true)
	if err != nil {
		return nil, proto.Errorf(proto.CodeInternal, "upstream %s: malformed task result: its taskId is not a string", u.name)
	}
	return out, nil
}

// taskRequest runs a tasks/get, tasks/update or tasks/cancel: the gateway
// id in params.taskId is opened under req's scope and replaced by the
// upstream's id (params and Mcp-Name); in the result, and in an error's
// message and data, the upstream's id becomes the gateway id again. An id
// that does not open (unknown, forged, another caller's or another
// scope's, another upstream's) is -32602 with one message, as SEP-2663
// answers a taskId the server does not recognize, so the answer does not
// tell whether the task exists; so are params that name a task twice
// (taskid.Param).
func (u *Upstream) taskRequest(ctx context.Context, req *proto.Request) ([]byte, *proto.Error) {
	gid, ok := taskid.Param(req.Params)
	if !ok {
		return nil, proto.Errorf(proto.CodeInvalidParams, "%s: params must name the task once, as the string taskId", req.Method)
	}
	var up, id string
	if c := u.opts.TaskIDs; c != nil {
		up, id, ok = c.Open(scopeOf(req), gid)
	}
	if !ok || up != u.name {
		return nil, proto.Errorf(proto.CodeInvalidParams, "%s: unknown taskId %q", req.Method, short(gid))
	}
	fwd := *req
	var err error
	if fwd.Params, err = taskid.Rewrite(req.Params, func(string) string { return id }, false); err != nil {
		return nil, proto.Errorf(proto.CodeInvalidParams, "%s: params.taskId is not a string", req.Method)
	}
	res, perr := u.request(ctx, &fwd)
	if perr != nil {
		return nil, hideID(perr, id, gid)
	}
	// The answer is about the task asked for, whatever id the upstream
	// wrote in it.
	if res, err = taskid.Rewrite(res, func(string) string { return gid }, false); err != nil {
		return nil, proto.Errorf(proto.CodeInternal, "upstream %s: malformed %s result: its taskId is not a string", u.name, req.Method)
	}
	return res, nil
}

// hideID returns the upstream's error with the upstream's task id, where
// it appears as written (unescaped), in its message and data replaced by
// the gateway's. An id shorter than 6 bytes is left alone: replacing it
// would garble the text around it, and it says little.
func hideID(perr *proto.Error, id, gid string) *proto.Error {
	if len(id) < 6 || !strings.Contains(perr.Msg, id) && !bytes.Contains(perr.Data, []byte(id)) {
		return perr
	}
	e := *perr
	e.Msg = strings.ReplaceAll(e.Msg, id, gid)
	e.Data = bytes.ReplaceAll(e.Data, []byte(id), []byte(gid))
	return &e
}

// short is id cut to a length fit for an error message.
func short(id string) string {
	if len(id) > 80 {
		return id[:80] + "…"
	}
	return id
}
