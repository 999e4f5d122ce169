package store

import (
	"fmt"
	"time"
)

// timeLayout is how times are stored in SQLite, and passed to PostgreSQL
// (which parses them into timestamptz): UTC, fixed width, nanoseconds.
// Fixed width makes string order equal time order, so SQLite's indexes on
// time columns sort correctly, and the text stays readable in the sqlite3
// shell.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

func encTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// encOptTime stores the zero time as NULL ("not yet").
func encOptTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return encTime(t)
}

// timeCol scans a stored time (NULL becomes the zero time) into *t.
type timeCol struct{ t *time.Time }

func (c timeCol) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case nil:
		*c.t = time.Time{}
		return nil
	case time.Time: // PostgreSQL's timestamptz
		*c.t = v.UTC()
		return nil
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return fmt.Errorf("time column holds %T, want text", src)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("time column: %w", err)
	}
	*c.t = t
	return nil
}
