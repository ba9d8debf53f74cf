package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHangupRemovesDemoFolder runs `memscope demo` on a pseudo-terminal
// (util-linux script) and hangs up: the demo's temporary folder must go.
func TestHangupRemovesDemoFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test builds the binary")
	}
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) not found: no pseudo-terminal to run the explorer on")
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := t.TempDir()
			bin := filepath.Join(tmp, "memscope")
			build := exec.Command("go", "build", "-o", bin, ".")
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("build: %v\n%s", err, out)
			}
			demoTmp := filepath.Join(tmp, "tmp")
			if err := os.Mkdir(demoTmp, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(scriptBin, "-qfec", bin+" demo", "/dev/null")
			cmd.Env = append(os.Environ(), "TMPDIR="+demoTmp, "TERM=xterm")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			demoDirs := func() []string { m, _ := filepath.Glob(filepath.Join(demoTmp, "memscope-demo-*")); return m }
			deadline := time.Now().Add(20 * time.Second)
			for len(demoDirs()) == 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if len(demoDirs()) == 0 {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Fatal("the demo never started")
			}
			time.Sleep(300 * time.Millisecond) // let it draw
			// The terminal's hangup goes to memscope, script's child (it
			// leads the pseudo-terminal's session).
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
			child, _ := strconv.Atoi(strings.Fields(string(b) + " 0")[0])
			if err != nil || child <= 0 {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Skipf("cannot find script's child: %v", err)
			}
			_ = syscall.Kill(child, sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Fatal("memscope did not exit")
			}
			// The explorer cleans up after script has gone.
			deadline = time.Now().Add(5 * time.Second)
			for len(demoDirs()) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if d := demoDirs(); len(d) > 0 {
				t.Errorf("%v left the demo folder behind: %v", sig, d)
			}
		})
	}
}
