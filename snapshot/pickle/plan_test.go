package pickle

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPlanSplitReadsHeaders: planning with frame headers read from the
// file (fileHeaders, what a mapped input uses) gives the plan planning
// from the bytes gives, for targets all along inputs with and without
// opcodes outside frames (pickle.dump writes a large bytes object
// between frames), and really reads them there: with the input's frame
// headers wiped, the plan is still found. A reader that comes up short
// leaves planning to the bytes; one that lies about a frame's length
// makes no plan.
func TestPlanSplitReadsHeaders(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	inputs := map[string][]byte{"distinct": genPickle(t, "distinct", 6000)}
	blob := filepath.Join(dir, "blob.pickle")
	script := `
import pickle, sys
e = [{'action': 'alloc', 'addr': i, 'size': 512, 'frames': [{'filename': 'f%d.py' % (i % 50), 'line': i % 7, 'name': 'g'}]} for i in range(20000)]
pickle.dump({'segments': [], 'blob': b'x' * 300000, 'device_traces': [e[:10000], [b'y' * 200000], e[10000:]]}, open(sys.argv[1], 'wb'), protocol=4)
`
	if out, err := exec.Command("python3", "-c", script, blob).CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, out)
	}
	var err error
	if inputs["blob"], err = os.ReadFile(blob); err != nil {
		t.Fatal(err)
	}
	for name, data := range inputs {
		path := filepath.Join(dir, name+".in")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fromFile := fileHeaders(f.ReadAt)
		short := func(int) ([9]byte, bool) { return [9]byte{}, false }
		plans := 0
		for k := 1; k < 40; k++ {
			target := len(data) * k / 40
			want, wantOK := planSplit(data, len(data)/32, target)
			for rname, read := range map[string]headerFunc{"file": fromFile, "short": short} {
				got, ok := planSplitRead(data, read, len(data)/32, target)
				if ok != wantOK || got != want {
					t.Fatalf("%s, target %d, %s reader: %+v %v, want %+v %v", name, target, rname, got, ok, want, wantOK)
				}
			}
			if !wantOK {
				continue
			}
			plans++
			// Wipe the headers of the frames planning skips (those
			// starting before the target, but the first, which says
			// the input is framed): only the file reader still knows
			// them.
			wiped := bytes.Clone(data)
			for pos := 2; pos < target; {
				n, _ := opSize(data, pos)
				if data[pos] == opFrame {
					n += int(binary.LittleEndian.Uint64(data[pos+1:]))
					if pos > 2 {
						clear(wiped[pos : pos+9])
					}
				}
				pos += n
			}
			if got, ok := planSplitRead(wiped, fromFile, len(data)/32, target); !ok || got != want {
				t.Fatalf("%s, target %d: with the headers wiped, read from the file: %+v %v, want %+v", name, target, got, ok, want)
			}
		}
		if plans < 20 {
			t.Fatalf("%s: only %d of 39 targets planned", name, plans)
		}
		lying := func(pos int) (h [9]byte, ok bool) {
			h[0] = opFrame
			binary.LittleEndian.PutUint64(h[1:], 1<<40)
			return h, true
		}
		if p, ok := planSplitRead(data, lying, 0, len(data)/2); ok {
			t.Errorf("%s: a reader claiming a 1 TiB frame gave a plan: %+v", name, p)
		}
	}
}
