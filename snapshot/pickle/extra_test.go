package pickle

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"memscope/snapshot/schema"
)

// TestTraceExtras: device_free, compile_context and user_metadata come back
// from TraceEntry.Extra whether the entry was recognised while decoding or
// bound from the generic form (a key the recogniser does not know), and
// entries with equal fields share one TraceExtra.
func TestTraceExtras(t *testing.T) {
	needPython(t)
	out := filepath.Join(t.TempDir(), "extras.pickle")
	script := `
import pickle, sys
na = 'N/A'
def e(action, **kw):
    d = {'action': action, 'addr': 4096, 'size': 512, 'stream': 0, 'time_us': 7}
    d.update(kw)
    d['frames'] = []
    return d
trace = [
    e('alloc', compile_context=''.join(['N', '/', 'A']), user_metadata=''),  # recognised
    e('alloc', compile_context='ctx2', user_metadata='meta'),
    e('oom', device_free=1 << 20),
    e('free_completed', compile_context='N/A', user_metadata='', pool_id=(0, 1)),  # generic
    e('free_completed'),
]
pickle.dump({'segments': [], 'device_traces': [trace]}, open(sys.argv[1], 'wb'), protocol=4)
`
	if b, err := exec.Command("python3", "-c", script, out).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeSnapshot(context.Background(), &data, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Traces[0]
	want := []schema.TraceExtra{
		{CompileContext: "N/A"},
		{CompileContext: "ctx2", UserMetadata: "meta"},
		{DeviceFree: 1 << 20},
		{CompileContext: "N/A"},
		{},
	}
	if len(tr) != len(want) {
		t.Fatalf("%d entries, want %d", len(tr), len(want))
	}
	for i, w := range want {
		if got := s.ExtraOf(&tr[i]); got != w {
			t.Errorf("entry %d: extra %+v, want %+v", i, got, w)
		}
	}
	if tr[0].Extra != tr[3].Extra {
		t.Errorf("equal extras not shared: %d and %d", tr[0].Extra, tr[3].Extra)
	}
	if tr[4].Extra != 0 || len(s.TraceExtras) != 3 {
		t.Errorf("extras %v, last entry's %d", s.TraceExtras, tr[4].Extra)
	}
}
