//go:build cgo && linux

package nvml

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML reads real GPUs through go-nvml. Every NVML call it makes happens
// after a successful Init: after a failed Init, any call (even Shutdown)
// can kill the process with an uncatchable symbol-lookup error.
type NVML struct {
	lib     gonvml.Interface
	driver  string
	devices []Device
	handles []gonvml.Device
	// ProcRoot is where process details are read ("/proc").
	ProcRoot string
	mu       sync.Mutex
	users    map[string]string
	closed   bool
	// failingSince is when every device started failing; after a while
	// NVML is re-initialised once (a driver reload invalidates handles).
	failingSince time.Time
	// dead is set when a re-Init failed: no NVML call may follow.
	dead error
}

// reinitAfter is how long every device must fail before Sample tries a
// Shutdown and a new Init.
const reinitAfter = 10 * time.Second

// Available reports whether this build can use NVML at all.
const Available = true

// Open initialises NVML (which wakes sleeping GPUs: call it only when live
// data is wanted).
func Open() (*NVML, error) { return OpenWith(gonvml.New()) }

// OpenWith initialises NVML through lib (tests pass go-nvml's mocks).
func OpenWith(lib gonvml.Interface) (*NVML, error) {
	if ret := lib.Init(); ret != gonvml.SUCCESS {
		return nil, initError(ret)
	}
	n := &NVML{lib: lib, ProcRoot: "/proc", users: map[string]string{}}
	if v, ret := lib.SystemGetDriverVersion(); ret == gonvml.SUCCESS {
		n.driver = v
	}
	if err := n.enumerate(); err != nil {
		lib.Shutdown()
		return nil, err
	}
	return n, nil
}

// enumerate reads the GPUs and their MIG instances.
func (n *NVML) enumerate() error {
	n.devices, n.handles = nil, nil
	count, ret := n.lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return fmt.Errorf("NVML: cannot count GPUs: %s", retName(ret))
	}
	for i := 0; i < count; i++ {
		h, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			continue
		}
		d := Device{Index: i, Parent: -1}
		d.Name, _ = h.GetName()
		d.UUID, _ = h.GetUUID()
		n.devices = append(n.devices, d)
		n.handles = append(n.handles, h)
		n.addMIG(i, h)
	}
	return nil
}

// addMIG lists the MIG instances of a GPU in MIG mode, after their parent.
func (n *NVML) addMIG(parent int, h gonvml.Device) {
	cur, _, ret := h.GetMigMode()
	if ret != gonvml.SUCCESS || cur != gonvml.DEVICE_MIG_ENABLE {
		return
	}
	maxN, ret := h.GetMaxMigDeviceCount()
	if ret != gonvml.SUCCESS {
		return
	}
	for j := 0; j < maxN; j++ {
		mh, ret := h.GetMigDeviceHandleByIndex(j)
		if ret != gonvml.SUCCESS {
			continue
		}
		d := Device{Index: 1000*(parent+1) + j, Parent: parent}
		d.Name, _ = mh.GetName()
		d.UUID, _ = mh.GetUUID()
		d.MIG = fmt.Sprintf("MIG %d", j)
		if i := strings.Index(d.Name, "MIG "); i >= 0 {
			d.MIG = d.Name[i:]
		}
		n.devices = append(n.devices, d)
		n.handles = append(n.handles, mh)
	}
}

// initError explains a failed Init without calling NVML again.
func initError(ret gonvml.Return) error {
	hint := ""
	switch ret {
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		hint = "libnvidia-ml.so.1 was not found: no NVIDIA driver on this machine, or a container started without the GPU runtime (--gpus / nvidia-container-toolkit)"
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		hint = "the NVIDIA kernel driver is not loaded (nvidia-smi would fail too)"
	case gonvml.ERROR_NO_PERMISSION:
		hint = "no permission to open the GPU devices (/dev/nvidia*)"
	case gonvml.ERROR_LIB_RM_VERSION_MISMATCH:
		hint = "the NVML library and the kernel driver versions differ (a driver update without a reboot?)"
	case gonvml.ERROR_FUNCTION_NOT_FOUND:
		hint = "the libnvidia-ml.so.1 found lacks NVML functions: perhaps the CUDA toolkit's stub library is first on the library path"
	}
	msg := "NVML initialisation failed: " + retName(ret)
	if hint != "" {
		msg += ": " + hint
	}
	return errors.New(msg)
}

// retName names an NVML return code without calling into the library.
func retName(ret gonvml.Return) string {
	names := map[gonvml.Return]string{
		gonvml.SUCCESS: "SUCCESS", gonvml.ERROR_UNINITIALIZED: "ERROR_UNINITIALIZED",
		gonvml.ERROR_INVALID_ARGUMENT: "ERROR_INVALID_ARGUMENT", gonvml.ERROR_NOT_SUPPORTED: "ERROR_NOT_SUPPORTED",
		gonvml.ERROR_NO_PERMISSION: "ERROR_NO_PERMISSION", gonvml.ERROR_NOT_FOUND: "ERROR_NOT_FOUND",
		gonvml.ERROR_DRIVER_NOT_LOADED: "ERROR_DRIVER_NOT_LOADED", gonvml.ERROR_TIMEOUT: "ERROR_TIMEOUT",
		gonvml.ERROR_LIBRARY_NOT_FOUND: "ERROR_LIBRARY_NOT_FOUND", gonvml.ERROR_FUNCTION_NOT_FOUND: "ERROR_FUNCTION_NOT_FOUND",
		gonvml.ERROR_GPU_IS_LOST: "ERROR_GPU_IS_LOST", gonvml.ERROR_LIB_RM_VERSION_MISMATCH: "ERROR_LIB_RM_VERSION_MISMATCH",
		gonvml.ERROR_UNKNOWN: "ERROR_UNKNOWN", gonvml.ERROR_INSUFFICIENT_SIZE: "ERROR_INSUFFICIENT_SIZE",
	}
	if s, ok := names[ret]; ok {
		return s
	}
	return "NVML error " + strconv.Itoa(int(ret))
}

// Name describes the source.
func (n *NVML) Name() string {
	if n.driver != "" {
		return "NVML, driver " + n.driver
	}
	return "NVML"
}

// Simulated is false.
func (n *NVML) Simulated() bool { return false }

// Devices lists GPUs and MIG instances.
func (n *NVML) Devices() []Device {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Device(nil), n.devices...)
}

func nan(ret gonvml.Return, v float64) float64 {
	if ret != gonvml.SUCCESS {
		return NA
	}
	return v
}

// Sample reads every device. A device that fails its memory query gets Err
// set (it disappeared or fell off the bus); the others are still read.
func (n *NVML) Sample(ctx context.Context) ([]Sample, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("NVML is closed")
	}
	if n.dead != nil {
		return nil, n.dead
	}
	now := time.Now()
	out := make([]Sample, 0, len(n.handles))
	failed := 0
	for i, h := range n.handles {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d := n.devices[i]
		s := Sample{Time: now, Device: d.Index, UtilGPU: NA, UtilMem: NA, TempC: NA, PowerW: NA, PowerLimitW: NA, SMClockMHz: NA}
		if m, ret := h.GetMemoryInfo_v2(); ret == gonvml.SUCCESS {
			s.Used, s.Reserved, s.Total = int64(m.Used), int64(m.Reserved), int64(m.Total)
		} else if ret == gonvml.ERROR_NOT_SUPPORTED || ret == gonvml.ERROR_FUNCTION_NOT_FOUND || ret == gonvml.ERROR_INVALID_ARGUMENT {
			m1, ret := h.GetMemoryInfo()
			if ret != gonvml.SUCCESS {
				s.Err = fmt.Errorf("GPU %d: memory: %s", d.Index, retName(ret))
			}
			s.Used, s.Total, s.MemV1 = int64(m1.Used), int64(m1.Total), true
		} else {
			s.Err = fmt.Errorf("GPU %d: memory: %s", d.Index, retName(ret))
		}
		if s.Err != nil {
			failed++
			out = append(out, s)
			continue
		}
		if u, ret := h.GetUtilizationRates(); ret == gonvml.SUCCESS {
			s.UtilGPU, s.UtilMem = float64(u.Gpu), float64(u.Memory)
		}
		t, ret := h.GetTemperature(gonvml.TEMPERATURE_GPU)
		s.TempC = nan(ret, float64(t))
		p, ret := h.GetPowerUsage()
		s.PowerW = nan(ret, float64(p)/1000)
		pl, ret := h.GetEnforcedPowerLimit()
		s.PowerLimitW = nan(ret, float64(pl)/1000)
		c, ret := h.GetClockInfo(gonvml.CLOCK_SM)
		s.SMClockMHz = nan(ret, float64(c))
		if procs, ret := h.GetComputeRunningProcesses(); ret == gonvml.SUCCESS {
			for _, p := range procs {
				s.Processes = append(s.Processes, n.process(int(p.Pid), d.Index, p.UsedGpuMemory))
			}
		}
		out = append(out, s)
	}
	if failed == len(n.handles) && failed > 0 {
		err := fmt.Errorf("no GPU could be read (%v)", out[0].Err)
		if n.failingSince.IsZero() {
			n.failingSince = now
		} else if now.Sub(n.failingSince) > reinitAfter {
			n.failingSince = time.Time{}
			if rerr := n.reinit(); rerr != nil {
				return nil, rerr
			}
			return out, fmt.Errorf("%v; NVML re-initialised", err)
		}
		return out, err
	}
	n.failingSince = time.Time{}
	return out, nil
}

// reinit shuts NVML down and initialises it again, re-reading the devices.
// If the new Init fails, NVML is marked dead: no call may follow a failed
// Init.
func (n *NVML) reinit() error {
	n.lib.Shutdown()
	if ret := n.lib.Init(); ret != gonvml.SUCCESS {
		n.dead = fmt.Errorf("NVML was lost and could not be re-initialised (%s); restart memscope once the driver is back", retName(ret))
		return n.dead
	}
	return n.enumerate()
}

// process fills in user and command from /proc; PIDs from another PID
// namespace (NVML reports host PIDs) are labelled, not dropped.
func (n *NVML) process(pid, gpu int, used uint64) Process {
	p := Process{PID: pid, GPU: gpu, Used: int64(used)}
	if used == ^uint64(0) || used == 0xFFFFFFFFFFFFFFFF { // NVML_VALUE_NOT_AVAILABLE
		p.Used = -1
	}
	dir := filepath.Join(n.ProcRoot, strconv.Itoa(pid))
	cmd, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		p.Command = "(host PID, not visible in this PID namespace)"
		return p
	}
	p.Visible = true
	p.Command = strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	if status, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" {
				p.User = n.userName(f[1])
			}
		}
	}
	return p
}

func (n *NVML) userName(uid string) string {
	if u, ok := n.users[uid]; ok {
		return u
	}
	name := uid
	if u, err := user.LookupId(uid); err == nil {
		name = u.Username
	}
	n.users[uid] = name
	return name
}

// Close shuts NVML down (it was initialised successfully, or Open would
// have failed).
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if n.dead != nil {
		return nil // the last Init failed: Shutdown must not be called
	}
	if ret := n.lib.Shutdown(); ret != gonvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", retName(ret))
	}
	return nil
}
