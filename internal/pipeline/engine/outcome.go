package engine

import (
	"encoding/json"
	"fmt"

	"nanohost/internal/pipeline"
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

// ParseStatus reads a status the way edge conditions do
// (pipeline.NormalizeOutcome): case-insensitive, "partial-success" and
// "partial success" for partial_success, failed/failure for fail,
// succeeded for success — and any other word as a custom outcome of the
// pipeline's own (needs_dod), which conditions route on.
func ParseStatus(s string) (Status, error) {
	norm, ok := pipeline.NormalizeOutcome(s)
	if !ok {
		return "", fmt.Errorf("%q is not an outcome (want success, partial_success, retry, fail, skipped, or a custom outcome word of letters, digits and _)", s)
	}
	return Status(norm), nil
}

// IsCustom reports whether s is a custom outcome (needs_dod), not one of
// the five statuses.
func (s Status) IsCustom() bool { return s != "" && !pipeline.IsCanonicalOutcome(string(s)) }

// IsSuccess reports whether the stage did its work: SUCCESS,
// PARTIAL_SUCCESS or a custom outcome. Such a stage satisfies a goal gate,
// is not retried, and counts as a succeeded parallel branch.
func (s Status) IsSuccess() bool {
	return s == StatusSuccess || s == StatusPartialSuccess || s.IsCustom()
}

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
