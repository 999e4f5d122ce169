package testkit

import (
	"os"
	"os/exec"
)

// Child is this test binary run again for the one test named, with env
// added to the environment: how a test puts part of itself in a process
// it can kill (SIGKILL mid-write, mid-checkout, mid-claim). The test
// named finds by env that it is the child, and skips when run on its own.
func Child(test string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}
