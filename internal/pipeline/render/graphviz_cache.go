package render

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Graphviz's compiled code is cached where only this user can reach it.
// wazero turns the WebAssembly into machine code (about a second here) and
// can keep it in a directory, loading it on later runs (tens of
// milliseconds). Whatever is in that directory runs as this user, so it must
// be a directory nobody else can write: upstream go-graphviz uses
// $TMPDIR/go-graphviz, made world-readable and trusted whoever made it —
// on a machine with a shared /tmp another user could plant code. The fork
// in third_party/go-graphviz takes the directory from us instead: this one,
// or none (compile in memory) when it cannot be had.

// graphvizCacheDir returns <user cache dir>/nanohost/graphviz, made if
// missing, after checking that it is a directory of this user's that nobody
// else can enter.
func graphvizCacheDir() (string, error) {
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
