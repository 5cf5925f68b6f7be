//go:build !linux

package worker

import "os/exec"

func setProcAttrs(cmd *exec.Cmd) {}

func killProc(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
