package taskserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// Task support of a tool, its execution.taskSupport in tools/list.
const (
	supportNone     = ""         // sync only; no execution field
	supportOptional = "optional" // a task when the client declares the extension, else sync
	supportRequired = "required" // a task; -32021 when the client does not declare the extension
)

const (
	failingJobDelay    = time.Second
	protocolErrorDelay = 200 * time.Millisecond
	resumeDelay        = 100 * time.Millisecond // from the last answer to the result
	mrtrTaskDelay      = 500 * time.Millisecond
	maxComputeSeconds  = 3600
	userNameKey        = "user_name"
)

// mrtrState is the requestState test_tool_with_task hands out in round 1. It
// is opaque to the client and checked when it comes back.
var mrtrState = base64.RawURLEncoding.EncodeToString([]byte(`{"tool":"test_tool_with_task","round":1}`))

// fixtureTool is a tool the fixture lists and answers itself.
type fixtureTool struct {
	name    string
	support string
	def     json.RawMessage // the Tool object tools/list carries
}

func newTool(name, support, description, inputSchema string) fixtureTool {
	def := map[string]any{
		"name":        name,
		"description": description,
		"inputSchema": json.RawMessage(inputSchema),
	}
	if support != supportNone {
		def["execution"] = map[string]string{"taskSupport": support}
	}
	data, err := json.Marshal(def)
	if err != nil {
		panic("taskserver: tool " + name + ": " + err.Error()) // the schemas below are constants
	}
	return fixtureTool{name: name, support: support, def: data}
}

func fixtureTools(greet bool) []fixtureTool {
	var tools []fixtureTool
	if greet {
		tools = append(tools, newTool("greet", supportNone, "Returns Hello, {name}! synchronously.",
			`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`))
	}
	return append(tools,
		newTool("slow_compute", supportOptional,
			"Sleeps for seconds, then returns a result naming label. A task when the client declares the tasks extension; cancellable.",
			`{"type":"object","properties":{"seconds":{"type":"number","minimum":0},"label":{"type":"string"}},"required":["seconds"]}`),
		newTool("failing_job", supportRequired,
			"A task that, after about a second, completes with a tool execution error (result.isError).",
			`{"type":"object","properties":{}}`),
		newTool("protocol_error_job", supportOptional,
			"A task that fails with a protocol-level error (status failed, inlined error).",
			`{"type":"object","properties":{}}`),
		newTool("confirm_delete", supportRequired,
			"A task that asks for confirmation (elicitation/create, through tasks/get inputRequests) before it deletes filename.",
			`{"type":"object","properties":{"filename":{"type":"string"}},"required":["filename"]}`),
		newTool("multi_input", supportRequired,
			"A task that asks for two inputs at once; they can be answered one tasks/update at a time.",
			`{"type":"object","properties":{}}`),
		newTool("test_tool_with_task", supportRequired,
			"Round 1 asks for user_name (InputRequiredResult); round 2, with the answer, creates a task whose result greets that name.",
			`{"type":"object","properties":{}}`),
	)
}

func (s *Server) tool(name string) *fixtureTool {
	for i := range s.tools {
		if s.tools[i].name == name {
			return &s.tools[i]
		}
	}
	return nil
}

// toolCall is the part of tools/call params the fixture reads.
type toolCall struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments"`
	InputResponses json.RawMessage            `json:"inputResponses"`
	RequestState   *string                    `json:"requestState"`
	Meta           map[string]json.RawMessage `json:"_meta"`
}

func (s *Server) serveToolCall(c *call, t *fixtureTool) {
	var p toolCall
	if err := json.Unmarshal(c.req.Params, &p); err != nil {
		c.fail(invalidParams("invalid params: " + err.Error()))
		return
	}
	if e := c.checkHeaders(p.Name); e != nil {
		c.fail(e)
		return
	}
	asTask := false
	if t.support != supportNone {
		asTask = declaresTasks(p.Meta)
		if t.support == supportRequired && !asTask {
			c.fail(missingCapability("tools/call of " + t.name))
			return
		}
	}
	res, e := s.runTool(c.r.Context(), t.name, p, asTask)
	if e != nil {
		c.fail(e)
		return
	}
	c.reply(res)
}

// runTool runs a fixture tool: synchronously, or, when asTask, by creating
// a task (or, for test_tool_with_task, first an MRTR round).
func (s *Server) runTool(ctx context.Context, name string, p toolCall, asTask bool) (any, *rpcError) {
	switch name {
	case "greet":
		var a struct {
			Name string `json:"name"`
		}
		if err := decodeArgs(p.Arguments, &a); err != nil || a.Name == "" {
			return nil, invalidParams("greet: arguments must carry a non-empty string name")
		}
		return textResult("Hello, "+a.Name+"!", false), nil

	case "slow_compute":
		var a struct {
			Seconds *float64 `json:"seconds"`
			Label   string   `json:"label"`
		}
		if err := decodeArgs(p.Arguments, &a); err != nil || a.Seconds == nil || *a.Seconds < 0 || *a.Seconds > maxComputeSeconds {
			return nil, invalidParams(fmt.Sprintf("slow_compute: seconds must be a number from 0 to %d", maxComputeSeconds))
		}
		d := time.Duration(*a.Seconds * float64(time.Second))
		out := outcome{result: textResult(fmt.Sprintf("slow_compute %q finished after %gs", a.Label, *a.Seconds), false)}
		if asTask {
			return s.create(name, plan{status: StatusWorking, after: d, outcome: out}), nil
		}
		if err := sleep(ctx, d); err != nil {
			return nil, &rpcError{Code: CodeInternalError, Message: "slow_compute: " + err.Error()}
		}
		return out.result, nil

	case "failing_job":
		out := outcome{result: textResult("failing_job: the job failed (a simulated tool execution error)", true)}
		return s.create(name, plan{status: StatusWorking, after: failingJobDelay, outcome: out}), nil

	case "protocol_error_job":
		e := &rpcError{Code: CodeInternalError, Message: "protocol_error_job: simulated internal failure"}
		if !asTask {
			return nil, e
		}
		return s.create(name, plan{status: StatusWorking, after: protocolErrorDelay, outcome: outcome{err: e}}), nil

	case "confirm_delete":
		var a struct {
			Filename string `json:"filename"`
		}
		if err := decodeArgs(p.Arguments, &a); err != nil || a.Filename == "" {
			return nil, invalidParams("confirm_delete: arguments must carry a non-empty string filename")
		}
		key := inputKey("confirm")
		return s.create(name, plan{
			status: StatusInputRequired,
			inputs: map[string]json.RawMessage{
				key: elicit(fmt.Sprintf("Delete %q?", a.Filename), `{"confirm":{"type":"boolean","title":"Delete the file"}}`, "confirm"),
			},
			resume: func(answers map[string]json.RawMessage) plan {
				text := "Kept " + a.Filename
				if ans := parseAnswer(answers[key]); ans.Action == "accept" && ans.Content["confirm"] == true {
					text = "Deleted " + a.Filename
				}
				return plan{status: StatusWorking, after: resumeDelay, outcome: outcome{result: textResult(text, false)}}
			},
		}), nil

	case "multi_input":
		nameKey, confirmKey := inputKey("name"), inputKey("confirm")
		return s.create(name, plan{
			status: StatusInputRequired,
			inputs: map[string]json.RawMessage{
				nameKey:    elicit("What is your name?", `{"name":{"type":"string"}}`, "name"),
				confirmKey: elicit("Proceed?", `{"confirm":{"type":"boolean"}}`, "confirm"),
			},
			resume: func(answers map[string]json.RawMessage) plan {
				n, cf := parseAnswer(answers[nameKey]), parseAnswer(answers[confirmKey])
				text := fmt.Sprintf("multi_input: name=%v (%s), confirm=%v (%s)", n.Content["name"], n.Action, cf.Content["confirm"], cf.Action)
				return plan{status: StatusWorking, after: resumeDelay, outcome: outcome{result: textResult(text, false)}}
			},
		}), nil

	case "test_tool_with_task":
		if p.RequestState != nil && *p.RequestState != mrtrState {
			return nil, invalidParams("test_tool_with_task: requestState was not issued by this server")
		}
		var answers map[string]json.RawMessage
		if len(p.InputResponses) > 0 && string(p.InputResponses) != "null" {
			if err := json.Unmarshal(p.InputResponses, &answers); err != nil {
				return nil, invalidParams("test_tool_with_task: inputResponses must be an object")
			}
		}
		if raw, ok := answers[userNameKey]; ok {
			ans := parseAnswer(raw)
			if n, _ := ans.Content["name"].(string); ans.Action == "accept" && n != "" {
				out := outcome{result: textResult("Hello, "+n+"! (name gathered by MRTR before the task was created)", false)}
				return s.create(name, plan{status: StatusWorking, after: mrtrTaskDelay, outcome: out}), nil
			}
		}
		// Round 1, or an answer without a name: ask (again).
		return map[string]any{
			"resultType": "input_required",
			"inputRequests": map[string]json.RawMessage{
				userNameKey: elicit("What is your name?", `{"name":{"type":"string","title":"Your name"}}`, "name"),
			},
			"requestState": mrtrState,
		}, nil
	}
	return nil, invalidParams("unknown tool " + name)
}

func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	return json.Unmarshal(raw, v)
}

// textResult is a CallToolResult with one text block.
func textResult(text string, isError bool) json.RawMessage {
	r := map[string]any{
		"resultType": "complete",
		"content":    []map[string]string{{"type": "text", "text": text}},
	}
	if isError {
		r["isError"] = true
	}
	data, _ := json.Marshal(r)
	return data
}

// elicit is a form-mode elicitation/create InputRequest with one field.
func elicit(message, properties, required string) json.RawMessage {
	data, _ := json.Marshal(map[string]any{
		"method": "elicitation/create",
		"params": map[string]any{
			"mode":    "form",
			"message": message,
			"requestedSchema": map[string]any{
				"type":       "object",
				"properties": json.RawMessage(properties),
				"required":   []string{required},
			},
		},
	})
	return data
}

// inputKey mints an opaque input request key.
func inputKey(prefix string) string {
	return prefix + "-" + rand.Text()[:10]
}

// elicitAnswer is an ElicitResult, as a client answers an input request.
type elicitAnswer struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content"`
}

func parseAnswer(raw json.RawMessage) elicitAnswer {
	var a elicitAnswer
	_ = json.Unmarshal(raw, &a)
	return a
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
