package agenttext

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseStatusFile(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    StatusFile
		wantErr string // substring; "" = no error
	}{
		{
			name: "appendix C layout",
			data: `{"outcome":"success","preferred_next_label":"Approve","suggested_next_ids":["deploy"],
				"context_updates":{"tests.passed":true,"nested.key":"v"},"notes":"all green","extra":1}`,
			want: StatusFile{Outcome: "success", PreferredLabel: "Approve", SuggestedNextIDs: []string{"deploy"},
				ContextUpdates: map[string]any{"tests.passed": true, "nested.key": "v"}, Notes: "all green"},
		},
		{
			name: "outcome-model spellings",
			data: `{"status":"Partial-Success","preferred_label":"Fix","failure_reason":"2 tests fail"}`,
			want: StatusFile{Outcome: "partial_success", PreferredLabel: "Fix", FailureReason: "2 tests fail"},
		},
		{
			name: "both spellings agreeing",
			data: `{"outcome":"fail","status":"fail"}`,
			want: StatusFile{Outcome: "fail"},
		},
		{
			name: "single next id as a string",
			data: `{"outcome":"success","suggested_next_ids":"deploy"}`,
			want: StatusFile{Outcome: "success", SuggestedNextIDs: []string{"deploy"}},
		},
		{
			name: "nulls are absent",
			data: `{"outcome":"retry","notes":null,"context_updates":null}`,
			want: StatusFile{Outcome: "retry"},
		},
		{name: "both spellings disagreeing", data: `{"outcome":"fail","status":"success"}`, wantErr: `both "outcome" and "status"`},
		{name: "missing outcome", data: `{"notes":"x"}`, wantErr: `no "outcome"`},
		{name: "custom outcome", data: `{"outcome":"needs_dod"}`, want: StatusFile{Outcome: "needs_dod"}},
		{name: "not an outcome", data: `{"outcome":"a b!"}`, wantErr: `"a b!" is not an outcome`},
		{name: "outcome not a string", data: `{"outcome":1}`, wantErr: `"outcome" must be a string, got a number`},
		{name: "next ids wrong type", data: `{"outcome":"success","suggested_next_ids":[1]}`, wantErr: `"suggested_next_ids" must be a list of strings`},
		{name: "context not an object", data: `{"outcome":"success","context_updates":"x"}`, wantErr: `"context_updates" must be an object, got a string`},
		{name: "not an object", data: `["success"]`, wantErr: "want a JSON object"},
		{name: "null", data: `null`, wantErr: "want a JSON object"},
		{name: "syntax error with position", data: "{\n  \"outcome\": \"success\",\n}", wantErr: "line 3, column 1"},
		{name: "empty", data: ``, wantErr: "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStatusFile([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestParseStatusFileSizeCap(t *testing.T) {
	big := `{"outcome":"success","notes":"` + strings.Repeat("x", MaxStatusFileSize) + `"}`
	_, err := ParseStatusFile([]byte(big))
	if err == nil || !strings.Contains(err.Error(), "1 MiB") {
		t.Fatalf("err = %v, want the 1 MiB limit named", err)
	}
}
