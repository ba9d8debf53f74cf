package pickle

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	pt "memscope/internal/pickletest"
)

func noFast(d *decoder) { d.noFast = true }

// TestFrameListFastPath: frame lists taken at once (frameList) leave
// exactly what the opcodes one by one leave, on one machine and on two,
// for the fuzz corpus, the samples, every generated shape and lists the
// fast path must refuse (a get of something that is not a frame, of the
// pending dict, an empty list, a list cut short); and it is taken where
// frames are memo reads, as PyTorch writes them.
func TestFrameListFastPath(t *testing.T) {
	inputs := corpusInputs(t)
	// What PyTorch 2.x writes (frame lists repeated byte for byte, which
	// frameList's cache takes at once), but not the larger files: they take
	// seconds each to compare and add no shape.
	for name, data := range samplePickles(t) {
		if (strings.HasPrefix(name, "h100/") || strings.HasPrefix(name, "h200/")) && len(data) <= 1<<20 {
			inputs["sample "+name] = data
		}
	}
	// Lists as pickle.dump writes them (EMPTY_LIST MEMOIZE MARK ... APPENDS),
	// memo: 0 the dict, 1 the first list, 2 a frame, 3 a string.
	f := pt.FrameDict("/w/a.py", 1, "f")
	w := &pt.Writer{}
	list := func(gets ...any) { writeList(w, gets...) }
	w.Op(pt.OpProto, 4, pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
	w.Put("frames")
	list(pt.Memoize(f), pt.Memoize("not a frame"))
	w.Put("a")
	list(pt.Ref(2), pt.Ref(2)) // two frames: taken at once
	w.Put("b")
	list(pt.Ref(2), pt.Ref(3)) // a string among them
	w.Put("c")
	list() // MARK APPENDS with nothing
	w.Put("d")
	list([]byte{pt.OpBinGet, 2}) // BINGET of a frame: taken at once
	w.Op(pt.OpSetItems, pt.OpStop)
	inputs["crafted lists"] = w.Bytes()
	// A get of the pending dict's slot inside its own frames list.
	w = &pt.Writer{}
	w.Op(pt.OpProto, 4, pt.OpEmptyDict, pt.OpMemoize, pt.OpMark)
	w.Put("frames")
	w.Op(pt.OpEmptyList, pt.OpMemoize, pt.OpMark)
	w.Put(pt.Ref(0))
	w.Op(pt.OpAppends, pt.OpSetItems, pt.OpStop)
	inputs["pending dict in its list"] = w.Bytes()
	taken := 0
	if !testing.Short() {
		for _, shape := range []string{"distinct", "shared", "late", "sharedlists", "multi", "selfref"} {
			if _, err := exec.LookPath("python3"); err == nil {
				inputs["gen "+shape] = genPickle(t, shape, 3000)
			}
		}
	}
	for name, data := range inputs {
		for _, split := range []splitFunc{nil, splitAt(1.0/32, 0.5)} {
			for _, cut := range []int{len(data), len(data) * 2 / 3} {
				in := data[:cut]
				fast, r1, e1 := decodeWith(context.Background(), in, nil, split, nil, nil)
				slow, r2, e2 := decodeWith(context.Background(), in, nil, split, nil, nil, noFast)
				switch {
				case (e1 == nil) != (e2 == nil):
					t.Fatalf("%s (%d bytes): fast %v, slow %v", name, cut, e1, e2)
				case e1 != nil:
					if e1.Error() != e2.Error() {
						t.Fatalf("%s (%d bytes): errors %q and %q", name, cut, e1, e2)
					}
				default:
					if canonical(fast.g, r1) != canonical(slow.g, r2) {
						t.Fatalf("%s (%d bytes): values differ", name, cut)
					}
					if fast.memo.len() != slow.memo.len() || fast.g.conts.len() != slow.g.conts.len() ||
						fast.g.traces.len() != slow.g.traces.len() || fast.g.stacks.len() != slow.g.stacks.len() {
						t.Fatalf("%s: memo %d/%d, containers %d/%d, trace records %d/%d, stacks %d/%d", name,
							fast.memo.len(), slow.memo.len(), fast.g.conts.len(), slow.g.conts.len(),
							fast.g.traces.len(), slow.g.traces.len(), fast.g.stacks.len(), slow.g.stacks.len())
					}
					taken += fast.fastLists
					if slow.fastLists != 0 {
						t.Fatalf("%s: the slow path took %d lists at once", name, slow.fastLists)
					}
				}
			}
		}
	}
	if taken == 0 {
		t.Error("the fast path was never taken")
	}
}

// writeList writes a list as pickle.dump does: EMPTY_LIST MEMOIZE MARK, the
// items, APPENDS.
func writeList(w *pt.Writer, items ...any) {
	w.Op(pt.OpEmptyList, pt.OpMemoize, pt.OpMark)
	for _, it := range items {
		w.Put(it)
	}
	w.Op(pt.OpAppends)
}
