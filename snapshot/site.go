package snapshot

import (
	"strings"
)

// The site of an allocation is the user's own line that made it; its op is
// the innermost torch frame under that line. Both are read from the stack
// after memory_viz's frameFilter (IsNoise) has hidden the unwinder,
// interpreter and dispatcher frames it hides.

// siteKind is what a frame is to the site rules.
type siteKind uint8

const (
	kindFiltered siteKind = iota // hidden by memory_viz, or the profiler's own hook
	kindPlumbing                 // allocator and dispatcher C++ frames under every allocation
	kindUser                     // Python: the user's own code
	kindLibrary                  // Python: torch, installed packages, the standard library
	kindNative                   // any other C/C++ frame
)

// classifySite says what a frame is to the site rules.
func classifySite(f Frame) siteKind {
	switch {
	case IsNoise(f) || IsProfilerFrame(f):
		return kindFiltered
	case isPythonFrame(f):
		if IsLibraryFrame(f) {
			return kindLibrary
		}
		return kindUser
	case isPlumbing(f) || isDispatcher(f):
		return kindPlumbing
	}
	return kindNative
}

// isDispatcher reports whether a C++ frame is generated dispatcher code:
// RegisterCUDA_0.cpp, VariableType_3.cpp and the like. memory_viz hides
// "/Register…" files only with a folder before them; PyTorch 2.11 writes
// the bare name, which says nothing about who asked for the memory.
func isDispatcher(f Frame) bool {
	base := baseName(f.Filename)
	return (strings.HasPrefix(base, "Register") || strings.HasPrefix(base, "VariableType") ||
		strings.HasPrefix(base, "ADInplaceOrView") || strings.HasPrefix(base, "TraceType")) && strings.HasSuffix(base, ".cpp")
}

// isPythonFrame reports whether a frame is Python code: a .py file, or one
// of the interpreter's pseudo-files (<frozen …>, <string>, <stdin>,
// <ipython-input-…>). C++ frames have a .cpp/.h file, "??" or nothing.
func isPythonFrame(f Frame) bool {
	fn := f.Filename
	return strings.HasSuffix(fn, ".py") || strings.HasSuffix(fn, ".pyx") ||
		(strings.HasPrefix(fn, "<") && strings.HasSuffix(fn, ">"))
}

// torchTop are the top-level names of the torch package: a path with
// /torch/<one of these> is torch's own code even outside site-packages (a
// source checkout), while a folder merely called "torch" (a venv at
// /opt/torch/.venv) is not.
var torchTop = map[string]bool{
	"nn": true, "optim": true, "autograd": true, "utils": true, "cuda": true, "distributed": true,
	"amp": true, "fx": true, "jit": true, "profiler": true, "backends": true, "ao": true, "export": true,
	"func": true, "nested": true, "sparse": true, "testing": true, "onnx": true, "multiprocessing": true,
	"library.py": true, "functional.py": true, "serialization.py": true, "overrides.py": true,
	"random.py": true, "storage.py": true, "hub.py": true, "quantization": true, "__init__.py": true,
}

// normPath is a frame's file with forward slashes (Windows paths appear in
// real snapshots).
func normPath(fn string) string { return strings.ReplaceAll(fn, `\`, "/") }

// IsLibraryFrame reports whether a Python frame is library code rather than
// the user's: torch, anything installed in site- or dist-packages, the
// standard library and frozen modules.
func IsLibraryFrame(f Frame) bool {
	fn := normPath(f.Filename)
	lower := strings.ToLower(fn)
	switch {
	case strings.Contains(lower, "/site-packages/"), strings.Contains(lower, "/dist-packages/"),
		strings.HasPrefix(fn, "<frozen"):
		return true
	case strings.Contains(lower, "/lib/python"), strings.Contains(lower, "/lib/pypy"):
		// The standard library (site-packages was handled above).
		return true
	case strings.Contains(fn, "/Lib/") && !strings.Contains(fn, "/Lib/site-packages/"):
		// Windows: C:\Python311\Lib\threading.py.
		return true
	}
	return isTorchPath(fn)
}

// isTorchPath reports whether a (slash) path is inside the torch package.
func isTorchPath(fn string) bool {
	for rest := fn; ; {
		i := strings.Index(rest, "torch/")
		if i < 0 {
			return false
		}
		if i == 0 || rest[i-1] == '/' {
			next := rest[i+len("torch/"):]
			if j := strings.IndexByte(next, '/'); j >= 0 {
				next = next[:j]
			}
			if torchTop[next] || strings.HasPrefix(next, "_") {
				return true
			}
		}
		rest = rest[i+len("torch/"):]
	}
}

// SiteIndex is the index of the frame that names where an allocation was
// made (its site), or -1 when the stack has no frame to show:
//   - the innermost frame of the user's own Python code (not torch, not
//     site- or dist-packages, not the standard library);
//   - else the innermost Python frame;
//   - else, for C++-only stacks (the autograd engine's threads), the
//     innermost autograd node (AddmmBackward0::apply), which names the
//     backward op;
//   - else the innermost C++ frame that is neither hidden by memory_viz nor
//     allocator plumbing.
//
// Frames memory_viz hides (IsNoise) and the memory profiler's own hooks
// are never a site.
func SiteIndex(st Stack) int {
	return siteIndex(st, func(f *Frame) siteKind { return classifySite(*f) })
}

// siteIndex is SiteIndex with the frame classifier given (the stages cache
// it per frame).
func siteIndex(st Stack, classify func(*Frame) siteKind) int {
	c := newSiteChoice()
	for i := range st.Len() {
		if c.add(i, classify(st.At(i)), st.At(i)) {
			break
		}
	}
	return c.index()
}

// siteChoice makes SiteIndex's choice from a stack's frames, given
// innermost first with their kinds: the first of each kind that can be a
// site.
type siteChoice struct{ user, python, node, native int }

func newSiteChoice() siteChoice { return siteChoice{-1, -1, -1, -1} }

// add notes frame i, f, of kind k, and says whether the choice is made (a
// user frame: no later frame can change it).
func (c *siteChoice) add(i int, k siteKind, f *Frame) bool {
	switch k {
	case kindUser:
		c.user = i
		return true
	case kindLibrary:
		if c.python < 0 {
			c.python = i
		}
	case kindNative:
		if c.node < 0 && isAutogradNode(f.Name) {
			c.node = i
		}
		if c.native < 0 {
			c.native = i
		}
	}
	return false
}

// index is the site's index, or -1.
func (c siteChoice) index() int {
	switch {
	case c.user >= 0:
		return c.user
	case c.python >= 0:
		return c.python
	case c.node >= 0:
		return c.node
	}
	return c.native
}

// isAutogradNode reports whether a C++ function is an autograd node's
// apply (torch::autograd::generated::MmBackward0::apply,
// torch::autograd::AccumulateGrad::apply).
func isAutogradNode(name string) bool {
	return strings.Contains(name, "torch::autograd::") &&
		(strings.Contains(name, "Backward") || strings.Contains(name, "AccumulateGrad")) &&
		strings.Contains(name, "::apply(")
}

// Site formats the frame SiteIndex chooses as "file:line function"; ""
// when the stack has none.
func Site(st Stack) string {
	if i := SiteIndex(st); i >= 0 {
		return SiteText(*st.At(i))
	}
	return ""
}

// SiteText formats a frame as a site: "file:line function" for Python; for
// C++ the function without its parameter list (and without the "??" of an
// unknown file), since a signature of 150 characters hides the name.
func SiteText(f Frame) string {
	if isPythonFrame(f) {
		return f.String()
	}
	name := cppName(f.Name)
	if f.Filename == "" || f.Filename == "??" {
		return name
	}
	f.Name = name
	return f.String()
}

// cppName shortens a C++ function signature to its qualified name: no
// parameter list, no trailing const or "[clone .isra.0]", no template
// arguments and no return type ("void at::native::f<float>(int) const" →
// "at::native::f"). "(anonymous namespace)" inside the name is kept. A
// name it cannot read is returned as it is.
func cppName(sig string) string {
	s := strings.TrimSpace(sig)
	for {
		i := strings.LastIndex(s, " [clone ")
		if i < 0 || !strings.HasSuffix(s, "]") {
			break
		}
		s = strings.TrimSpace(s[:i])
	}
	s = strings.TrimSuffix(s, " const")
	if strings.HasSuffix(s, ")") {
		depth, cut := 0, -1
		for i := len(s) - 1; i >= 0 && cut < 0; i-- {
			switch s[i] {
			case ')':
				depth++
			case '(':
				if depth--; depth == 0 {
					cut = i
				}
			}
		}
		if cut <= 0 {
			return sig
		}
		s = s[:cut]
	}
	if strings.Contains(s, "operator") {
		return s // operator<, operator() : angle brackets are the name
	}
	var b strings.Builder
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '<':
			depth++
		case c == '>' && depth > 0:
			depth--
		case depth == 0:
			if c == ' ' && !strings.HasSuffix(s[:i], "(anonymous") {
				// A space outside templates ends a return type.
				b.Reset()
				start = i + 1
				continue
			}
			b.WriteByte(c)
		}
	}
	if out := b.String(); out != "" && depth == 0 && start < len(s) {
		return out
	}
	return s
}

// OpIndex is the index of the innermost torch frame of a stack (its op), or
// -1: a C++ operator call (at::_ops::mm::call) when the stack has C++
// frames, else the innermost Python frame inside torch. Allocation
// primitives (empty, empty_strided, empty_like) name the op only when no
// other operator encloses them: under mm they are how mm got its output.
func OpIndex(st Stack) int {
	primitive := -1
	for i := range st.Len() {
		f := st.At(i)
		if op, ok := atenOp(f.Name); ok {
			if !isAllocPrimitive(op) {
				return i
			}
			if primitive < 0 {
				primitive = i
			}
			continue
		}
		if primitive < 0 && isPythonFrame(*f) && isTorchPath(normPath(f.Filename)) && !IsProfilerFrame(*f) {
			return i
		}
	}
	return primitive
}

// Op names the op of a stack: "aten::mm" for a C++ operator, else the torch
// Python frame as "torch/functional.py:373 einsum"; "" when there is none.
func Op(st Stack) string {
	i := OpIndex(st)
	if i < 0 {
		return ""
	}
	f := *st.At(i)
	if op, ok := atenOp(f.Name); ok {
		return "aten::" + op
	}
	f.Filename = torchRelative(f.Filename)
	return f.String()
}

// atenOp extracts the operator of a dispatcher frame
// ("at::_ops::mm::call(...)" → "mm").
func atenOp(name string) (string, bool) {
	i := strings.Index(name, "at::_ops::")
	if i < 0 {
		return "", false
	}
	rest := name[i+len("at::_ops::"):]
	j := strings.Index(rest, "::")
	if j <= 0 {
		return "", false
	}
	return rest[:j], true
}

func isAllocPrimitive(op string) bool {
	switch op {
	case "empty", "empty_strided", "empty_memory_format", "empty_like", "new_empty", "new_empty_strided",
		"resize_", "_empty_affine_quantized", "zeros", "zeros_like", "new_zeros":
		return true
	}
	return false
}

// torchRelative shortens a path inside torch to start at "torch/".
func torchRelative(fn string) string {
	p := normPath(fn)
	if i := strings.LastIndex(p, "/site-packages/torch/"); i >= 0 {
		return p[i+len("/site-packages/"):]
	}
	if i := strings.LastIndex(p, "/dist-packages/torch/"); i >= 0 {
		return p[i+len("/dist-packages/"):]
	}
	return fn
}
