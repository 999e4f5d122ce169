package gate

// Posting returns the posting of a gate that an Ask in this process is
// waiting on, and false when none is (the gate was never asked here, or
// is settled). Other front ends than chat — the web dashboard — use it to
// answer the current posting through HandleAnswer.
func (d *Desk) Posting(runID, gateID string) (Gate, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.waiting[gateKey{runID, gateID}]
	if !ok {
		return Gate{}, false
	}
	return w.gate, true
}
