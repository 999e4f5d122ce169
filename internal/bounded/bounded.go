// Package bounded reads files and streams that must not be larger than a
// limit: a request an agent wrote, a sub-pipeline's source. It is a leaf
// (only the standard library) so the agent runner inside the image may
// import it as well as the host.
package bounded

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// TooLargeError refuses what is over its limit.
type TooLargeError struct {
	Name  string // what was read: a file's base name
	Limit int64  // bytes
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes", e.Name, e.Limit)
}

// Read reads r to its end, refusing it with a *TooLargeError named name
// when it holds more than limit bytes. It reads at most one byte more than
// the limit, whatever r holds.
func Read(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Name: name, Limit: limit}
	}
	return data, nil
}

// ReadFile is Read of the file at path, named by its base name.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, filepath.Base(path), limit)
}
