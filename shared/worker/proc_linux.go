package worker

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts the worker in its own process group (so it and its
// children are killed together) and has the kernel kill it when the
// platform dies, even by kill -9: no worker outlives its platform.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killProc(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
