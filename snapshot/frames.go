package snapshot

import (
	"slices"
	"strings"
)

// Which frames say who made an allocation, and which do not: interpreter
// and dispatcher noise, allocator plumbing, PyTorch-Memory-Profiler's own
// frames, installed libraries; and the frame a stack's location names.

// noiseNames and noiseFiles are what IsNoise looks for in a frame's name
// and file.
var noiseNames = []string{"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
	"__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"}
var noiseFiles = []string{"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
	"Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"}

// IsNoise reports whether PyTorch's viewers hide this frame (unwinder,
// interpreter and dispatcher internals).
func IsNoise(f Frame) bool {
	for _, n := range noiseNames {
		if strings.Contains(f.Name, n) {
			return true
		}
	}
	for _, n := range noiseFiles {
		if strings.Contains(f.Filename, n) {
			return true
		}
	}
	return false
}

// Location is where an allocation was made: its site (see SiteIndex), as
// "file:line function".
func Location(st Stack) string { return Site(st) }

// plumbing names allocator and dispatcher frames that sit under every
// allocation and never answer "who allocated this".
var plumbing = []string{"CachingAllocator", "c10::cuda::", "at::detail::empty", "at::empty", "empty_strided",
	"empty_cuda", "wrap_kernel_functor", "at::_ops::", "at::native::empty"}

// IsPlumbing reports whether a frame is allocator or dispatcher plumbing
// (CachingAllocator, empty_cuda, at::_ops): present under every allocation,
// it never says who asked for the memory.
func IsPlumbing(f Frame) bool { return isPlumbing(f) }

func isPlumbing(f Frame) bool {
	for _, p := range plumbing {
		if strings.Contains(f.Name, p) {
			return true
		}
	}
	return false
}

// LocationFrame is the frame Location formats.
func LocationFrame(st Stack) (Frame, bool) {
	if i := LocationIndex(st); i >= 0 {
		return *st.At(i), true
	}
	return Frame{}, false
}

// IsProfilerFrame reports whether a frame belongs to PyTorch-Memory-
// Profiler's own hook or to the torch machinery its dispatch mode runs
// through (_pytree, _python_dispatch, __torch_dispatch__). Such frames sit
// innermost in every estimated tensor's stack and say nothing about who
// made it.
func IsProfilerFrame(f Frame) bool {
	fn := strings.ReplaceAll(f.Filename, "\\", "/")
	return strings.Contains(fn, "/memory_profiler/") || strings.HasPrefix(fn, "memory_profiler/") ||
		strings.HasSuffix(fn, "torch/utils/_pytree.py") || strings.HasSuffix(fn, "torch/utils/_python_dispatch.py") ||
		f.Name == "__torch_dispatch__"
}

// libraryDirs mark frames of installed libraries and the interpreter, as
// opposed to the model's own code.
var libraryDirs = []string{"/site-packages/", "/dist-packages/", "/torch/", "/lib/python", "<frozen"}

// EstimateLocationIndex chooses the frame that names where an estimated
// tensor was made: the innermost frame in Megatron's code (the profiler's
// own viewer looks for megatron/core/), else the innermost frame of the
// model's code (outside installed libraries), else what LocationIndex
// chooses. The profiler's frames never count.
func EstimateLocationIndex(st Stack) int {
	user := -1
	for i, f := range st.All() {
		if IsNoise(*f) || isPlumbing(*f) || IsProfilerFrame(*f) {
			continue
		}
		fn := strings.ReplaceAll(f.Filename, "\\", "/")
		if strings.Contains(fn, "megatron/") {
			return i
		}
		if user < 0 && !slices.ContainsFunc(libraryDirs, func(d string) bool { return strings.Contains(fn, d) }) {
			user = i
		}
	}
	if user >= 0 {
		return user
	}
	return LocationIndex(st)
}

// EstimateLocation formats the frame EstimateLocationIndex chooses.
func EstimateLocation(st Stack) string {
	if i := EstimateLocationIndex(st); i >= 0 {
		return st.At(i).String()
	}
	return ""
}

// LocationIndex is the index of the frame Location formats, or -1.
func LocationIndex(st Stack) int { return SiteIndex(st) }
