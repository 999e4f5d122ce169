package engine

// Hooks for the external tests.

// EncodeJournalLine is one line of events.jsonl as the file journal writes it.
func EncodeJournalLine(e Event, d *Delta) ([]byte, error) { return appendJournalLine(nil, &e, d) }

// FileJournals is the default JournalOpener.
func FileJournals(durable bool) JournalOpener { return fileJournals{durable: durable} }
