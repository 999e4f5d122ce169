package container

// ResumeSession tells the backend which agent session a full-fidelity
// thread had in an earlier process (the host records session ids in its
// store): the thread's next container resumes it, so a conversation goes on
// across host restarts. It changes nothing when the thread already has a
// session in this process, or when sessionID is empty.
func (b *Backend) ResumeSession(runID, thread, sessionID string) {
	if sessionID == "" {
		return
	}
	t := b.thread(threadKey{run: runID, thread: thread})
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessionID == "" {
		t.sessionID = sessionID
	}
}
