package bounded

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadFileRefusesOneByteOverTheLimit: a file of exactly the limit is
// read whole; one byte more is refused with its name and the limit.
func TestReadFileRefusesOneByteOverTheLimit(t *testing.T) {
	dir := t.TempDir()
	exact, over := filepath.Join(dir, "exact.dot"), filepath.Join(dir, "over.dot")
	if err := os.WriteFile(exact, []byte("12345678"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, []byte("123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile(exact, 8); err != nil || string(data) != "12345678" {
		t.Fatalf("a file of exactly the limit: %q, %v", data, err)
	}
	_, err := ReadFile(over, 8)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Name != "over.dot" || tooLarge.Limit != 8 {
		t.Fatalf("a file one byte over the limit: %v, want a TooLargeError for over.dot", err)
	}
	if err.Error() != "over.dot is larger than 8 bytes" {
		t.Errorf("refusal %q", err)
	}
}

// TestReadStopsAtOneByteOverTheLimit: an endless stream is refused after
// limit+1 bytes, not read to its end.
func TestReadStopsAtOneByteOverTheLimit(t *testing.T) {
	r := &counting{}
	if _, err := Read(r, "stdin", 1<<10); err == nil {
		t.Fatal("an endless stream was read")
	}
	if r.n > 1<<10+1 {
		t.Errorf("read %d bytes of an endless stream with a limit of 1024", r.n)
	}
	if _, err := Read(strings.NewReader(""), "empty", 0); err != nil {
		t.Errorf("an empty stream with a limit of 0: %v", err)
	}
}

// counting is an endless stream that counts what was read of it.
type counting struct{ n int }

func (c *counting) Read(p []byte) (int, error) {
	c.n += len(p)
	return len(p), nil
}
