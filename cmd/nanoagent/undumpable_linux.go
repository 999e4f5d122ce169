package main

import "syscall"

// makeUndumpable sets PR_SET_DUMPABLE to 0: processes of the same user (the
// agent) can then no longer ptrace us or open /proc/<pid>/mem, /environ or
// /fd, where the nonce and the secrets could otherwise be read.
func makeUndumpable() error {
	const prSetDumpable = 4
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
