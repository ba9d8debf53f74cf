//go:build cgo && linux

package nvml

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// mockServer is an 8-GPU DGX H100 with the funcs the mock leaves unset
// (utilization, temperature, power, memory v2, processes) filled in.
func mockServer(t *testing.T) *server.Server {
	t.Helper()
	s := dgxh100.New()
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		idx := i
		dev.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
			return gonvml.Memory_v2{Total: 80 << 30, Reserved: 512 << 20, Used: uint64(10+idx) << 30, Free: uint64(70-idx) << 30}, gonvml.SUCCESS
		}
		dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{Gpu: uint32(50 + idx), Memory: 20}, gonvml.SUCCESS
		}
		dev.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 60, gonvml.SUCCESS }
		dev.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 350000, gonvml.SUCCESS }
		dev.GetEnforcedPowerLimitFunc = func() (uint32, gonvml.Return) { return 700000, gonvml.SUCCESS }
		dev.GetClockInfoFunc = func(gonvml.ClockType) (uint32, gonvml.Return) { return 1980, gonvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
			return []gonvml.ProcessInfo{{Pid: uint32(os.Getpid()), UsedGpuMemory: 4 << 30}, {Pid: 999999999, UsedGpuMemory: 1 << 30}}, gonvml.SUCCESS
		}
	}
	return s
}

func TestNVMLMock(t *testing.T) {
	n, err := OpenWith(mockServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if len(n.Devices()) != 8 || !strings.Contains(n.Name(), "550.54.15") {
		t.Fatalf("devices %d name %q", len(n.Devices()), n.Name())
	}
	samples, err := n.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s := samples[3]
	if s.Used != 13<<30 || s.Reserved != 512<<20 || s.Total != 80<<30 || s.MemV1 {
		t.Errorf("memory: %+v", s)
	}
	if s.UtilGPU != 53 || s.TempC != 60 || s.PowerW != 350 || s.PowerLimitW != 700 || s.SMClockMHz != 1980 {
		t.Errorf("metrics: %+v", s)
	}
	if len(s.Processes) != 2 {
		t.Fatalf("processes: %+v", s.Processes)
	}
	me, ghost := s.Processes[0], s.Processes[1]
	if !me.Visible || me.Used != 4<<30 || me.Command == "" || me.User == "" {
		t.Errorf("own process: %+v", me)
	}
	// A host PID absent from this PID namespace is labelled, not dropped.
	if ghost.Visible || !strings.Contains(ghost.Command, "not visible in this PID namespace") {
		t.Errorf("missing PID: %+v", ghost)
	}
}

func TestNVMLUnsupportedAndFallback(t *testing.T) {
	s := mockServer(t)
	d := s.Devices[0].(*server.Device)
	d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) { return gonvml.Memory_v2{}, gonvml.ERROR_NOT_SUPPORTED }
	d.MemoryInfo = gonvml.Memory{Total: 80 << 30, Used: 5 << 30}
	d.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) { return nil, gonvml.ERROR_NOT_SUPPORTED }
	n, err := OpenWith(s)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	samples, err := n.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := samples[0]
	if !got.MemV1 || got.Used != 5<<30 || got.Err != nil {
		t.Errorf("v1 fallback: %+v", got)
	}
	if !math.IsNaN(got.TempC) || !math.IsNaN(got.PowerW) || got.Processes != nil {
		t.Errorf("unsupported metrics must read as n/a: %+v", got)
	}
}

func TestNVMLDeviceDisappears(t *testing.T) {
	s := mockServer(t)
	n, err := OpenWith(s)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s.Devices[2].(*server.Device).GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		return gonvml.Memory_v2{}, gonvml.ERROR_GPU_IS_LOST
	}
	samples, err := n.Sample(context.Background())
	if err != nil {
		t.Fatalf("one lost GPU must not fail the others: %v", err)
	}
	if samples[2].Err == nil || !strings.Contains(samples[2].Err.Error(), "ERROR_GPU_IS_LOST") {
		t.Errorf("lost GPU: %+v", samples[2])
	}
	if samples[1].Err != nil || samples[1].Used == 0 {
		t.Errorf("other GPUs: %+v", samples[1])
	}
}

// TestNVMLDriverReload: when every GPU keeps failing, NVML is shut down and
// initialised again; if that Init fails, no call follows.
func TestNVMLDriverReload(t *testing.T) {
	s := mockServer(t)
	n, err := OpenWith(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range s.Devices {
		d.(*server.Device).GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) { return gonvml.Memory_v2{}, gonvml.ERROR_GPU_IS_LOST }
	}
	if _, err := n.Sample(context.Background()); err == nil {
		t.Fatal("all GPUs lost: want an error")
	}
	n.failingSince = n.failingSince.Add(-time.Minute) // as if it had failed for a while
	s.InitFunc = func() gonvml.Return { return gonvml.ERROR_DRIVER_NOT_LOADED }
	inits := len(s.InitCalls())
	_, err = n.Sample(context.Background())
	if err == nil || !strings.Contains(err.Error(), "could not be re-initialised") || len(s.InitCalls()) != inits+1 {
		t.Fatalf("re-init: %v", err)
	}
	shutdowns := len(s.ShutdownCalls())
	if _, err := n.Sample(context.Background()); err == nil {
		t.Error("dead NVML must keep failing")
	}
	if err := n.Close(); err != nil || len(s.ShutdownCalls()) != shutdowns || len(s.InitCalls()) != inits+1 {
		t.Error("no NVML call may follow a failed Init")
	}
}

// TestNVMLInitFailureMakesNoFurtherCall: after a failed Init, any NVML call
// (even Shutdown) can kill the process. The mock panics on every func left
// nil, so reaching one fails the test.
func TestNVMLInitFailureMakesNoFurtherCall(t *testing.T) {
	for _, ret := range []gonvml.Return{gonvml.ERROR_LIBRARY_NOT_FOUND, gonvml.ERROR_DRIVER_NOT_LOADED, gonvml.ERROR_LIB_RM_VERSION_MISMATCH} {
		lib := &mock.Interface{InitFunc: func() gonvml.Return { return ret }}
		n, err := OpenWith(lib)
		if err == nil || n != nil {
			t.Fatalf("%v: want an error", ret)
		}
		if len(lib.InitCalls()) != 1 || len(lib.ShutdownCalls()) != 0 {
			t.Errorf("%v: calls after a failed Init", ret)
		}
		if !strings.Contains(err.Error(), "NVML initialisation failed") {
			t.Errorf("error: %v", err)
		}
	}
	_, err := OpenWith(&mock.Interface{InitFunc: func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }})
	if !strings.Contains(err.Error(), "libnvidia-ml.so.1 was not found") {
		t.Errorf("the library-not-found hint: %v", err)
	}
}

// TestNVMLOnThisMachine opens the real library: without a driver (CI, this
// development machine) it must fail with a reason, not crash.
func TestNVMLOnThisMachine(t *testing.T) {
	n, err := Open()
	if err != nil {
		if !strings.Contains(err.Error(), "NVML initialisation failed") {
			t.Errorf("unexpected error: %v", err)
		}
		return
	}
	defer n.Close()
	if _, err := n.Sample(context.Background()); err != nil {
		t.Errorf("sample on a real GPU: %v", err)
	}
}

func BenchmarkSampleMock8(b *testing.B) {
	s := dgxh100.New()
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) { return gonvml.Memory_v2{Total: 80 << 30}, gonvml.SUCCESS }
		dev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) { return gonvml.Utilization{}, gonvml.SUCCESS }
		dev.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 60, gonvml.SUCCESS }
		dev.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 1, gonvml.SUCCESS }
		dev.GetEnforcedPowerLimitFunc = func() (uint32, gonvml.Return) { return 1, gonvml.SUCCESS }
		dev.GetClockInfoFunc = func(gonvml.ClockType) (uint32, gonvml.Return) { return 1, gonvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
			return []gonvml.ProcessInfo{{Pid: uint32(os.Getpid()), UsedGpuMemory: 1}}, gonvml.SUCCESS
		}
	}
	n, err := OpenWith(s)
	if err != nil {
		b.Fatal(err)
	}
	n.ProcRoot = filepath.Join("/proc")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := n.Sample(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSampleReal samples the GPUs of this machine through the real
// driver; it is skipped where NVML cannot be initialised.
func BenchmarkSampleReal(b *testing.B) {
	n, err := Open()
	if err != nil {
		b.Skipf("no NVML here: %v", err)
	}
	defer n.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := n.Sample(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
