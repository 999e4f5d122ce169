// Package privatetmp gives the process a private temporary directory while
// the packages it links initialise, and puts TMPDIR back when main starts.
//
// Why it exists: github.com/goccy/go-graphviz compiles Graphviz's WebAssembly
// in its package init and caches the machine code wazero makes in
// $TMPDIR/go-graphviz, a directory it creates world-readable and trusts
// whoever created it. On a machine with a shared /tmp another user could
// create that directory first and plant code every nanohost command would run.
// No setting of go-graphviz's moves the cache, and its init runs before any of
// nanohost's own packages (Go initialises packages in import-path order, and
// "github.com/…" sorts before "nanohost/…"). This package is a module of its
// own whose path, early.nanohost/…, sorts first, so its init runs before
// go-graphviz's: it points TMPDIR at a directory only this user can enter —
// nanohost/graphviz under the user's cache directory, where the compiled code
// is reused by later commands — and main calls Restore before doing anything
// else, so the containers and commands nanohost starts see the TMPDIR it was
// given.
package privatetmp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

var (
	original, hadOriginal = os.LookupEnv("TMPDIR")
	// throwaway is a directory made for this process alone (when the user
	// has no cache directory to keep the compiled code in); Restore removes it.
	throwaway string
	// Dir is the private directory TMPDIR pointed at while packages
	// initialised, "" if none could be made (then TMPDIR was left alone).
	Dir string
)

func init() {
	dir, err := cacheDir()
	if err != nil {
		dir, err = os.MkdirTemp("", "nanohost-graphviz-")
		if err != nil {
			return
		}
		throwaway = dir
	}
	if os.Setenv("TMPDIR", dir) == nil {
		Dir = dir
	}
}

// cacheDir returns <user cache dir>/nanohost/graphviz, made if missing, after
// checking that it is a directory of this user's that nobody else can enter.
func cacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "nanohost", "graphviz")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, private(dir)
}

// private refuses a directory that is a symlink, is not the user's own, or
// lets others in (a directory of the user's own is made private instead).
func private(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() {
		return errors.New("not a directory")
	}
	if int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d", dir, st.Uid)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// Restore sets TMPDIR back to what the process was started with and removes
// a throwaway directory. Call it first thing in main.
func Restore() {
	if hadOriginal {
		os.Setenv("TMPDIR", original)
	} else {
		os.Unsetenv("TMPDIR")
	}
	if throwaway != "" {
		os.RemoveAll(throwaway)
		throwaway = ""
	}
}
