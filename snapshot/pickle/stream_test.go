package pickle

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeStream releases data to the decoder as a stream does, in steps of
// random size: bytes not yet released, and bytes further behind than Keep
// past what drop was given, hold garbage, so a machine that read either
// would decode something else.
type fakeStream struct {
	data, buf []byte
	avail     int
	rnd       *rand.Rand
	maxStep   int
	waits     int
	err       error // returned once avail reaches errAt
	errAt     int
}

func newFakeStream(data []byte, seed uint64, maxStep, keep int) (*Stream, *fakeStream, func(int, int)) {
	f := &fakeStream{data: data, buf: make([]byte, len(data)), rnd: rand.New(rand.NewPCG(seed, 1)), maxStep: maxStep, errAt: -1}
	for i := range f.buf {
		f.buf[i] = byte(f.rnd.Uint32())
	}
	s := &Stream{Buf: f.buf, Wait: f.wait, Size: len(data), Keep: keep}
	drop := func(_, to int) {
		for i := range max(0, to-keep) {
			f.buf[i] = byte(i*7 + 3)
		}
	}
	return s, f, drop
}

func (f *fakeStream) wait(n int) (int, error) {
	f.waits++
	if f.errAt >= 0 && n > f.errAt {
		f.avail = max(f.avail, f.errAt)
		copy(f.buf[:f.avail], f.data[:f.avail])
		return f.avail, f.err
	}
	to := min(len(f.data), max(f.avail, n+f.rnd.IntN(f.maxStep+1)))
	copy(f.buf[f.avail:to], f.data[f.avail:to])
	f.avail = to
	return to, nil
}

// streamInputs are framed pickles of every shape the tests have: real
// files (PyTorch 2.11 on an H100 and H200) and generated ones, frame lists
// shared or not, with a compile_context of 100 kB, which pickle writes
// outside the frames.
func streamInputs(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, p := range []string{"../../testdata/snapshots/h100/gpt_adamw.pickle.gz", "../../testdata/snapshots/h100/train_cpp_stacks.pickle.gz",
		"../../testdata/snapshots/h200/big.pickle.gz", "../../testdata/snapshots/h200/cpp.pickle"} {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if zr, err := gzip.NewReader(bytes.NewReader(raw)); err == nil {
			if raw, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		out[filepath.Base(p)] = raw
	}
	if _, err := exec.LookPath("python3"); err != nil {
		return out
	}
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"pool":     {"--entries", "20000", "--frames", "shared", "--frame-pool", "200", "--stacks", "3000", "--depth", "12"},
		"unshared": {"--entries", "20000", "--frames", "unshared", "--depth", "8", "--frees", "random"},
	} {
		p := filepath.Join(dir, name+".pickle")
		if b, err := exec.Command("python3", append(append([]string{"../../scripts/gen_snapshot.py"}, args...), p)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = raw
	}
	py := `import pickle, sys
s = pickle.load(open(sys.argv[1], 'rb'))
t = s['device_traces'][0]
t[len(t) // 2]['compile_context'] = 'x' * 100000
pickle.dump(s, open(sys.argv[1], 'wb'), protocol=4)`
	p := filepath.Join(dir, "pool.pickle")
	if b, err := exec.Command("python3", "-c", py, p).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out["pool with an unframed string"] = raw
	return out
}

// TestDecodeStreamAsArrives: a framed pickle decoded as it arrives, in
// steps of 1 byte to 256 kB, is the snapshot decoding it whole gives,
// without reading what has not arrived or what lies past Keep behind.
func TestDecodeStreamAsArrives(t *testing.T) {
	for name, data := range streamInputs(t) {
		if !Framed(data) {
			t.Fatalf("%s: not a framed pickle", name)
		}
		whole := bytes.Clone(data)
		want, err := DecodeSnapshot(context.Background(), &whole, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		steps := []int{0, 1 << 10, 256 << 10}
		if len(data) < 4<<20 {
			steps = append(steps, 1) // a byte at a time (and exact frame ends)
		}
		for i, step := range steps {
			s, f, drop := newFakeStream(data, uint64(i), step, 1<<20)
			got, err := DecodeStream(context.Background(), s, drop, nil)
			if err != nil {
				t.Fatalf("%s, steps up to %d: %v", name, step, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, steps up to %d: not the whole file's snapshot", name, step)
			}
			if step == 1 && f.waits < len(data)/(64<<10) {
				t.Errorf("%s: %d waits: the stream was not read frame by frame", name, f.waits)
			}
		}
	}
}

// TestDecodeStreamEnds: a stream that ends early, or fails, is an error,
// and so is what is not a framed pickle.
func TestDecodeStreamEnds(t *testing.T) {
	data := streamInputs(t)["gpt_adamw.pickle.gz"]
	for _, cut := range []int{2, 11, 64 << 10, len(data) / 2, len(data) - 1} {
		s, _, drop := newFakeStream(data[:cut], 1, 4096, 1<<20)
		if _, err := DecodeStream(context.Background(), s, drop, nil); err == nil {
			t.Errorf("cut at %d: no error", cut)
		}
	}
	boom := errors.New("gzip: unexpected EOF (file truncated?)")
	s, f, drop := newFakeStream(data, 1, 4096, 1<<20)
	f.err, f.errAt = boom, len(data)/3
	if _, err := DecodeStream(context.Background(), s, drop, nil); !errors.Is(err, boom) {
		t.Errorf("the stream's error: %v", err)
	}
	for _, head := range [][]byte{{opProto, 2, opEmptyDict}, {opProto, 4, opEmptyDict}, []byte("{}")} {
		s, _, drop := newFakeStream(head, 1, 0, 1<<20)
		if _, err := DecodeStream(context.Background(), s, drop, nil); err == nil || !strings.Contains(err.Error(), "framed") {
			t.Errorf("%q: %v", head, err)
		}
	}
}

// FuzzDecodeStream: whatever a framed pickle holds, decoding it as it
// arrives (in steps of random size) never panics, and a snapshot it gives
// is the one decoding the whole input gives. (The stream may refuse more:
// an opcode split between frames, which Python refuses too.)
func FuzzDecodeStream(f *testing.F) {
	for _, p := range []string{"../../testdata/snapshots/synthetic/unknown_and_oom.pickle", "../../testdata/snapshots/synthetic/proto5.pickle",
		"../../testdata/snapshots/synthetic/base.pickle"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint64(1), uint16(64))
	}
	f.Add(pickleOf([]byte{opEmptyList, opMemoize, opMark}, frameOps("a.py", 1, "f"), frameOps("b.py", 2, "g"), []byte{opAppends}), uint64(2), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64, step uint16) {
		if !Framed(data) {
			return
		}
		s, _, drop := newFakeStream(data, seed, int(step), 1<<20)
		got, err := DecodeStream(context.Background(), s, drop, nil)
		if err != nil {
			return
		}
		whole := bytes.Clone(data)
		want, err := DecodeSnapshot(context.Background(), &whole, nil)
		if err != nil {
			t.Fatalf("the stream decoded what the whole input refuses: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatal("the stream's snapshot differs from the whole input's")
		}
	})
}

// TestStreamKeep: a stream's machine compares a frame list with the list
// before only while that one lies within Keep bytes behind it: with Keep
// large the repeats of a real file's lists are taken from the list before,
// with Keep 0 none is, and both decode what the whole input gives.
func TestStreamKeep(t *testing.T) {
	data := streamInputs(t)["train_cpp_stacks.pickle.gz"]
	whole := bytes.Clone(data)
	want, err := DecodeSnapshot(context.Background(), &whole, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []int{0, 1 << 20} {
		s, _, drop := newFakeStream(data, 5, 4096, keep)
		if _, err := s.Wait(streamHead); err != nil {
			t.Fatal(err)
		}
		d, root, err := decodeWith(context.Background(), s.Buf[:2], nil, nil, drop, &offHeapPool{}, s.machine)
		if err != nil {
			t.Fatal(err)
		}
		repeats := d.spans.repeats
		got, err := bindDecoded(d.g, root, d.streamed)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("keep %d: not the whole file's snapshot", keep)
		}
		if (repeats > 0) != (keep > 0) {
			t.Errorf("keep %d: %d lists taken from the list before", keep, repeats)
		}
	}
}
