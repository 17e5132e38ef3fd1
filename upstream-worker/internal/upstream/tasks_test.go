package upstream

import (
	"testing"

	"github.com/switchyard-mcp/switchyard/proto"
)

func TestHideID(t *testing.T) {
	tests := []struct {
		name     string
		in       proto.Error
		msg      string
		data     string
		sameBack bool
	}{
		{"message and data", proto.Error{Code: -32602, Msg: "task UP-SECRET-42 expired", Data: []byte(`{"taskId":"UP-SECRET-42"}`)},
			"task sy1.G expired", `{"taskId":"sy1.G"}`, false},
		{"absent", proto.Error{Code: -32602, Msg: "no such task"}, "no such task", "", true},
		{"too short to replace", proto.Error{Code: -32602, Msg: "task 7 of 17 expired"}, "task 7 of 17 expired", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "UP-SECRET-42"
			if tt.name == "too short to replace" {
				id = "7"
			}
			in := tt.in
			got := hideID(&in, id, "sy1.G")
			if got.Msg != tt.msg || string(got.Data) != tt.data || got.Code != tt.in.Code || (got == &in) != tt.sameBack {
				t.Fatalf("hideID = %+v (same %v)", got, got == &in)
			}
			if in.Msg != tt.in.Msg {
				t.Fatal("hideID changed its argument")
			}
		})
	}
}
