package engine

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Status is a stage outcome status (spec §5.2).
type Status string

const (
	StatusSuccess        Status = "success"
	StatusPartialSuccess Status = "partial_success"
	StatusRetry          Status = "retry"
	StatusFail           Status = "fail"
	StatusSkipped        Status = "skipped"
)

// ParseStatus reads a status case-insensitively; "partial-success" and
// "partial success" are accepted spellings of partial_success.
func ParseStatus(s string) (Status, error) {
	norm := strings.ToLower(strings.TrimSpace(s))
	norm = strings.NewReplacer("-", "_", " ", "_").Replace(norm)
	switch Status(norm) {
	case StatusSuccess, StatusPartialSuccess, StatusRetry, StatusFail, StatusSkipped:
		return Status(norm), nil
	case "failure", "failed":
		return StatusFail, nil
	}
	return "", fmt.Errorf("unknown outcome %q (want success, partial_success, retry, fail or skipped)", s)
}

// IsSuccess reports whether the status satisfies a goal gate.
func (s Status) IsSuccess() bool { return s == StatusSuccess || s == StatusPartialSuccess }

// Outcome is the result of executing a node (spec §5.2).
type Outcome struct {
	Status           Status         `json:"status"`
	PreferredLabel   string         `json:"preferred_label,omitempty"`
	SuggestedNextIDs []string       `json:"suggested_next_ids,omitempty"`
	ContextUpdates   map[string]any `json:"context_updates,omitempty"`
	Notes            string         `json:"notes,omitempty"`
	FailureReason    string         `json:"failure_reason,omitempty"`
}

// MarshalStatusFile renders the outcome in the spec's Appendix C status.json
// layout (with "outcome" and "preferred_next_label"), plus our extra fields.
func (o Outcome) MarshalStatusFile() ([]byte, error) {
	return json.MarshalIndent(struct {
		Outcome            Status         `json:"outcome"`
		PreferredNextLabel string         `json:"preferred_next_label,omitempty"`
		SuggestedNextIDs   []string       `json:"suggested_next_ids,omitempty"`
		ContextUpdates     map[string]any `json:"context_updates,omitempty"`
		Notes              string         `json:"notes,omitempty"`
		FailureReason      string         `json:"failure_reason,omitempty"`
	}{o.Status, o.PreferredLabel, o.SuggestedNextIDs, o.ContextUpdates, o.Notes, o.FailureReason}, "", "  ")
}
