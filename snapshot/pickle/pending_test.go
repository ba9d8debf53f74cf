package pickle

import (
	"encoding/binary"
	"os/exec"
	"strings"
	"testing"
)

// Frame dicts become values without a container (see pendingFrame), and
// every other use of a fresh dict gives it one (materialize). These inputs
// take each way a fresh dict can be used; CPython's pickle is the oracle.

func su(s string) []byte { return append([]byte{opShortBinUni, byte(len(s))}, s...) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// frameItems writes a frame's keys and values in the order given.
func frameKV(file string, line byte, name string) []byte {
	return cat(su("filename"), su(file), su("line"), []byte{opBinInt1, line}, su("name"), su(name))
}

func frameOps(file string, line byte, name string) []byte {
	return cat([]byte{opEmptyDict, opMemoize, opMark}, frameKV(file, line, name), []byte{opSetItems})
}

func longBinGet(i uint32) []byte {
	return binary.LittleEndian.AppendUint32([]byte{opLongBinGet}, i)
}

func pickleOf(body ...[]byte) []byte {
	return cat([]byte{opProto, 4}, cat(body...), []byte{opStop})
}

var pendingCases = []struct {
	name string
	data []byte
	// frames is how many frames the table should hold, -1 to skip.
	frames int
	// refused is part of the error for inputs memscope refuses.
	refused string
}{
	{"frames in a list", pickleOf([]byte{opEmptyList, opMemoize, opMark}, frameOps("a.py", 1, "f"), frameOps("b.py", 2, "g"), []byte{opAppends}), 2, ""},
	{"frame shared through the memo", pickleOf([]byte{opEmptyList, opMemoize, opMark}, frameOps("a.py", 1, "f"), []byte{opBinGet, 1}, longBinGet(1), []byte{opAppends}), 1, ""},
	{"equal frames interned once", pickleOf([]byte{opEmptyList, opMemoize, opMark}, frameOps("a.py", 1, "f"), frameOps("a.py", 1, "f"), []byte{opAppends}), 1, ""},
	{"keys in another order", pickleOf([]byte{opEmptyList, opMemoize, opMark}, frameOps("a.py", 1, "f"),
		[]byte{opEmptyDict, opMemoize, opMark}, su("name"), su("g"), su("filename"), su("b.py"), su("line"), []byte{opBinInt1, 3, opSetItems},
		frameOps("c.py", 4, "h"), []byte{opAppends}), 3, ""},
	{"dict reads itself before it is filled (BINGET)", pickleOf([]byte{opEmptyDict, opMemoize, opMark}, su("filename"), su("a.py"), su("line"), []byte{opBinInt1, 1}, su("name"), []byte{opBinGet, 0, opSetItems}), 0, ""},
	{"dict reads itself before it is filled (LONG_BINGET)", pickleOf([]byte{opEmptyDict, opMemoize, opMark}, su("filename"), su("a.py"), su("line"), []byte{opBinInt1, 1}, su("name"), longBinGet(0), []byte{opSetItems}), 0, ""},
	{"empty dicts as list items", pickleOf([]byte{opEmptyList, opMemoize, opMark, opEmptyDict, opMemoize, opEmptyDict, opMemoize, opAppends}), 0, ""},
	{"empty dict as a dict value", pickleOf([]byte{opEmptyDict, opMemoize, opMark}, su("k"), []byte{opEmptyDict, opMemoize, opSetItems}), 0, ""},
	{"fresh dict popped, then read from the memo", pickleOf([]byte{opEmptyList, opMemoize, opMark, opEmptyDict, opMemoize, opPop, opBinGet, 1, opAppends}), 0, ""},
	{"fresh dict memoized twice", pickleOf([]byte{opEmptyList, opMemoize, opMark, opEmptyDict, opMemoize, opMemoize, opMark}, frameKV("a.py", 1, "f"), []byte{opSetItems, opBinGet, 1, opBinGet, 2, opAppends}), 1, ""},
	{"protocol 2 memo (BINPUT)", cat([]byte{opProto, 2, opEmptyList, opBinPut, 0, opMark, opEmptyDict, opBinPut, 1, opMark}, frameKV("a.py", 1, "f"), []byte{opSetItems, opBinGet, 1, opAppends, opStop}), 1, ""},
	{"fresh dict in a tuple", pickleOf([]byte{opEmptyDict, opMemoize, opTuple1}), 0, ""},
	{"fresh dict not memoized", pickleOf([]byte{opEmptyList, opMark, opEmptyDict, opMark}, frameKV("a.py", 1, "f"), []byte{opSetItems, opAppends}), 1, ""},
	{"3 keys that are not a frame", pickleOf([]byte{opEmptyDict, opMemoize, opMark}, su("filename"), su("a.py"), su("line"), su("x"), su("name"), su("f"), []byte{opSetItems}), 0, ""},
	{"frame then more items (SETITEMS)", pickleOf(frameOps("a.py", 1, "f"), []byte{opMark}, su("extra"), []byte{opBinInt1, 1, opSetItems}), -1, "frame dict that was already filled"},
	{"frame then more items (SETITEM)", pickleOf(frameOps("a.py", 1, "f"), su("extra"), []byte{opBinInt1, 1, opSetItem}), -1, "frame dict that was already filled"},
	{"frame then nothing more (empty SETITEMS)", pickleOf(frameOps("a.py", 1, "f"), []byte{opMark, opSetItems}), 1, ""},
	{"fresh dict is the whole pickle", pickleOf([]byte{opEmptyDict}), 0, ""},
}

func TestPendingDicts(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: CPython is the oracle here")
	}
	inputs := map[string][]byte{}
	for _, c := range pendingCases {
		g, _, err := decodePickle(c.data)
		switch {
		case c.refused != "":
			if err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.refused)
			}
			if err == nil || !strings.Contains(err.Error(), "limit") {
				t.Errorf("%s: the refusal does not say it is memscope's limit: %v", c.name, err)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if c.frames >= 0 && g.frames.len() != c.frames {
			t.Errorf("%s: %d frames interned, want %d", c.name, g.frames.len(), c.frames)
		}
		inputs[c.name] = c.data
	}
	if agreed := compareWithPython(t, inputs); agreed != len(inputs) {
		t.Errorf("%d of %d inputs agree with CPython", agreed, len(inputs))
	}
}

// TestFramesTakeNoContainers: a fresh frame dict becomes a value, so a list
// of frames costs containers only for the list.
func TestFramesTakeNoContainers(t *testing.T) {
	g, root, err := decodePickle(pendingCases[0].data)
	if err != nil {
		t.Fatal(err)
	}
	if g.conts.len() != 1 || g.cont(root.ref).kind != cStack {
		t.Errorf("%d containers, root kind %d: want 1, a stack", g.conts.len(), g.cont(root.ref).kind)
	}
}
