package taskserver

import (
	"crypto/rand"
	"encoding/json"
	"time"
)

// Task statuses (SEP-2663).
const (
	StatusWorking       = "working"
	StatusInputRequired = "input_required"
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
	StatusCancelled     = "cancelled"
)

// plan is what a task does next: run for a while and then settle on an
// outcome, or park on input requests and continue with resume once every
// one is answered.
type plan struct {
	status  string        // StatusWorking or StatusInputRequired
	after   time.Duration // working: how long until the outcome
	outcome outcome       // working: the terminal state it settles on

	inputs map[string]json.RawMessage                    // input_required: request key -> InputRequest
	resume func(answers map[string]json.RawMessage) plan // input_required: next step, given every answer
}

// outcome is a finished task: a tool result (completed) or an error (failed).
type outcome struct {
	result json.RawMessage
	err    *rpcError
}

// task is one task's state. Only Server methods touch it, with Server.mu held.
type task struct {
	id       string
	created  time.Time
	updated  time.Time
	status   string
	doneAt   time.Time // working: when outcome applies
	outcome  outcome
	pending  map[string]json.RawMessage // input_required: unanswered requests
	answers  map[string]json.RawMessage // input_required: answers so far
	resumeFn func(map[string]json.RawMessage) plan
}

func (t *task) apply(p plan, now time.Time) {
	t.status, t.updated = p.status, now
	t.pending, t.answers, t.resumeFn = nil, nil, nil
	switch p.status {
	case StatusWorking:
		t.doneAt, t.outcome = now.Add(p.after), p.outcome
	case StatusInputRequired:
		t.pending, t.answers, t.resumeFn = p.inputs, make(map[string]json.RawMessage), p.resume
	}
}

// advance settles a working task whose time has come.
func (t *task) advance(now time.Time) {
	if t.status != StatusWorking || now.Before(t.doneAt) {
		return
	}
	t.updated = t.doneAt
	if t.outcome.err != nil {
		t.status = StatusFailed
	} else {
		t.status = StatusCompleted
	}
}

func terminal(status string) bool {
	return status == StatusCompleted || status == StatusFailed || status == StatusCancelled
}

// taskJSON is both wire shapes of a task: CreateTaskResult (resultType
// "task", no result, error or inputRequests) and the DetailedTask of
// tasks/get (resultType "complete").
type taskJSON struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          int64                      `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          *rpcError                  `json:"error,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// view renders t; detailed adds what tasks/get inlines. s.mu must be held.
func (s *Server) view(t *task, detailed bool) taskJSON {
	v := taskJSON{
		ResultType:    "task",
		TaskID:        t.id,
		Status:        t.status,
		CreatedAt:     t.created.UTC().Format(timeLayout),
		LastUpdatedAt: t.updated.UTC().Format(timeLayout),
		TTLMs:         s.opts.TTL.Milliseconds(),
	}
	if !terminal(t.status) {
		v.PollIntervalMs = s.opts.PollInterval.Milliseconds()
	}
	if !detailed {
		return v
	}
	v.ResultType = "complete"
	switch t.status {
	case StatusCompleted:
		v.Result = t.outcome.result
	case StatusFailed:
		v.Error = t.outcome.err
	case StatusInputRequired:
		v.InputRequests = make(map[string]json.RawMessage, len(t.pending))
		for k, r := range t.pending {
			v.InputRequests[k] = r
		}
	}
	return v
}

// sweep settles due tasks and drops expired ones: a task that is not
// running expires TTL after its last change. s.mu must be held.
func (s *Server) sweep(now time.Time) {
	for id, t := range s.tasks {
		t.advance(now)
		if t.status != StatusWorking && now.Sub(t.updated) >= s.opts.TTL {
			delete(s.tasks, id)
		}
	}
}

// create stores a new task following p and returns its CreateTaskResult.
// The task is stored before the result is returned, so an immediate
// tasks/get finds it (SEP-2663 strong consistency).
func (s *Server) create(tool string, p plan) taskJSON {
	now := s.opts.Now()
	t := &task{id: rand.Text(), created: now}
	t.apply(p, now)
	t.advance(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	s.tasks[t.id] = t
	s.log.Debug("task created", "task_id", t.id, "tool", tool, "status", t.status)
	return s.view(t, false)
}

// serveTasks answers tasks/get, tasks/update and tasks/cancel.
func (s *Server) serveTasks(c *call) {
	var p struct {
		TaskID         string                     `json:"taskId"`
		InputResponses json.RawMessage            `json:"inputResponses"`
		Meta           map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(c.req.Params, &p); err != nil {
		c.fail(invalidParams("invalid params: " + err.Error()))
		return
	}
	if e := c.checkHeaders(p.TaskID); e != nil {
		c.fail(e)
		return
	}
	if !declaresTasks(p.Meta) {
		c.fail(missingCapability(c.req.Method))
		return
	}
	if p.TaskID == "" {
		c.fail(invalidParams("missing taskId"))
		return
	}
	var answers map[string]json.RawMessage
	if c.req.Method == "tasks/update" {
		if json.Unmarshal(p.InputResponses, &answers) != nil || answers == nil {
			c.fail(invalidParams("tasks/update: inputResponses must be an object"))
			return
		}
	}

	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	t, ok := s.tasks[p.TaskID]
	if !ok {
		c.fail(invalidParams("unknown taskId"))
		return
	}
	switch c.req.Method {
	case "tasks/get":
		c.reply(s.view(t, true))
	case "tasks/cancel":
		// Cancelling a terminal task changes nothing and is acked the same.
		if !terminal(t.status) {
			t.status, t.updated = StatusCancelled, now
			t.pending, t.answers, t.resumeFn = nil, nil, nil
			s.log.Debug("task cancelled", "task_id", t.id)
		}
		c.reply(map[string]string{"resultType": "complete"})
	case "tasks/update":
		// Answers to keys that are not pending (already answered, or never
		// asked) are ignored; the task resumes once none is left.
		if t.status == StatusInputRequired {
			answered := false
			for k, v := range answers {
				if _, ok := t.pending[k]; ok {
					delete(t.pending, k)
					t.answers[k] = v
					answered = true
				}
			}
			if answered {
				t.updated = now
			}
			if len(t.pending) == 0 {
				t.apply(t.resumeFn(t.answers), now)
				t.advance(now)
				s.log.Debug("task resumed", "task_id", t.id, "status", t.status)
			}
		}
		c.reply(map[string]string{"resultType": "complete"})
	}
}
