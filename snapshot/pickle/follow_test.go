package pickle

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

// TestFollowingHelpers: a helper whose list ends well before the next
// helper's start (a device's trace, where the next device's follows)
// starts a helper of its own there, which joins too, in every layout:
// pickle.dump's batches with frames (protocol 4) and without (protocol 2),
// and the C++ pickler's one batch a list. With less than followMin left,
// or where the first helper's frames were mostly new ones (framesRepeat),
// none follows. Either way the machines build what one builds.
func TestFollowingHelpers(t *testing.T) {
	for _, c := range []struct {
		name     string
		data     []byte
		distinct bool // frames
	}{
		{"protocol 4", genPickle(t, "multishared", 9000), false},
		{"protocol 2", genPickleProto(t, "multishared", 9000, 2), false},
		{"C++ layout", genCpp(t, "", 12000, 300, 3, 1), false},
		{"distinct frames", genPickle(t, "multi", 9000), true},
	} {
		// The helper starts in the second device's trace, which ends at
		// about two thirds of the input.
		split := splitAt(1.0/32, 0.45)
		one, root1, err := decodeWith(context.Background(), c.data, nil, nil, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := canonical(one.g, root1)
		for _, least := range []int{1, len(c.data)} {
			name := fmt.Sprintf("%s, followMin %d", c.name, least)
			d, root, err := decodeWith(context.Background(), c.data, nil, split, nil, nil,
				func(d *decoder) { d.followMin = least })
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := canonical(d.g, root); got != want {
				t.Fatalf("%s: values differ (%d and %d bytes of canonical form)", name, len(got), len(want))
			}
			joins := 2
			if least == len(c.data) || c.distinct {
				joins = 1
			}
			if len(d.helpers) != joins || len(d.joined) != joins {
				t.Errorf("%s: %d helpers, %d joined; want %d", name, len(d.helpers), len(d.joined), joins)
			}
		}
	}
}

// TestFollowingHelperStopped: a decode that fails after a helper started
// one to follow it waits for both and frees what both hold, whether the
// main machine had joined the first (input cut short in the second's
// region) or failed before its region (a bad opcode); the error is one
// machine's.
func TestFollowingHelperStopped(t *testing.T) {
	data := genPickleProto(t, "multishared", 9000, 2)
	// An APPENDS a tenth of the way in, made an opcode that does not exist.
	bad := bytes.Clone(data)
	i := bytes.Index(bad[len(bad)/10:], []byte{opAppends, opMark, opEmptyDict})
	if i < 0 {
		t.Fatal("no batch boundary")
	}
	bad[len(bad)/10+i] = 0xff
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"cut short", data[:len(data)*9/10]},
		{"a bad opcode before the regions", bad},
	} {
		_, _, err1 := decodeWith(context.Background(), c.in, nil, nil, nil, nil)
		pool := &offHeapPool{}
		var d *decoder
		_, _, err2 := decodeWith(context.Background(), c.in, nil, splitAt(1.0/32, 0.3), nil, pool,
			func(m *decoder) { m.followMin, d = 1, m })
		if err1 == nil || err2 == nil || err1.Error() != err2.Error() {
			t.Fatalf("%s: one machine: %v; with helpers: %v", c.name, err1, err2)
		}
		if len(d.helpers) == 0 {
			t.Fatalf("%s: no helper ran", c.name)
		}
		if n := pool.live.Load(); n != 0 {
			t.Errorf("%s: %d chunks off the heap left mapped", c.name, n)
		}
	}
}

// TestDrainFollower: draining a helper that the main machine never joined
// cancels it and the helper it started, waits for both, and frees what
// each holds off the heap.
func TestDrainFollower(t *testing.T) {
	pool := &offHeapPool{}
	made := func(follow *helper) *decoder {
		d := newDecoder(nil)
		d.g.setPool(pool)
		d.g.traces.push(rawTrace{})
		d.follow = follow
		return d
	}
	cancelled := 0
	mk := func(out *decoder) *helper {
		h := &helper{done: make(chan *decoder, 1), cancel: func() { cancelled++ }}
		h.done <- out
		return h
	}
	follower := mk(made(nil))
	first := mk(made(follower))
	if n := pool.live.Load(); n != 2 {
		t.Fatalf("%d chunks off the heap, want 2", n)
	}
	first.drain()
	if n := pool.live.Load(); n != 0 || !first.joined || !follower.joined || cancelled != 2 {
		t.Errorf("after drain: %d chunks off the heap, joined %v and %v, %d cancelled; want 0, both, 2",
			n, first.joined, follower.joined, cancelled)
	}
}

// TestFollowPlan: the helper that follows one starts at the next batch
// boundary past where the first one's batches ended, and only where at
// least least bytes are left to it before the first one's stop, and the
// boundary is within batchSearchMax of that end.
func TestFollowPlan(t *testing.T) {
	data := genPickle(t, "multishared", 9000)
	p, ok := planSplit(data, len(data)/32, len(data)/3)
	if !ok {
		t.Fatal("no plan")
	}
	end := p.at // a boundary: what follows it is a batch
	next, ok := followPlan(data, p, end, 1)
	if !ok || next.at <= end || next.prefix != p.prefix || next.stop != p.stop {
		t.Fatalf("followPlan(end %d) = %+v, %v; want a region past it, with p's prefix and stop (%+v)", end, next, ok, p)
	}
	if want, _ := batchStart(data, end); next.at != want {
		t.Errorf("follow at %d, want the next batch boundary, %d", next.at, want)
	}
	left := p.stop - next.at
	for _, c := range []struct {
		least int
		ok    bool
	}{{left, true}, {left + 1, false}} {
		if _, ok := followPlan(data, p, end, c.least); ok != c.ok {
			t.Errorf("%d bytes left, least %d: %v, want %v", left, c.least, ok, c.ok)
		}
	}
	// Past the traces only the segments are left, in one batch.
	segs := bytes.Index(data, []byte("\x8c\x08segments"))
	if segs < 0 {
		t.Fatal("no segments key")
	}
	if _, ok := followPlan(data, p, segs, 1); ok {
		t.Error("a follow planned past the last batch boundary")
	}

	// Without frames, a boundary is found only within batchSearchMax.
	for _, c := range []struct {
		gap int
		ok  bool
	}{{batchSearchMax - 5, true}, {batchSearchMax - 4, false}} {
		in := append([]byte{opProto, 2}, bytes.Repeat([]byte{opNone}, c.gap)...)
		in = append(in, opAppends, opMark, opEmptyDict, opBinPut, 1)
		in = append(in, bytes.Repeat([]byte{opNone}, 64)...)
		q := splitPlan{prefix: 2, at: 2, stop: len(in), walk: true}
		next, ok := followPlan(in, q, 2, 1)
		if ok != c.ok || ok && (next.at != 2+c.gap+1 || next.inBatch) {
			t.Errorf("a batch %d bytes past the end: %+v, %v; want %v", c.gap, next, ok, c.ok)
		}
	}
}

// TestFramesRepeat: a helper starts a follower when it met at most one
// distinct frame per followFrameBytes of its region.
func TestFramesRepeat(t *testing.T) {
	const n = 100 * followFrameBytes
	for _, c := range []struct {
		frames int
		want   bool
	}{{0, true}, {100, true}, {101, false}} {
		if got := framesRepeat(c.frames, n); got != c.want {
			t.Errorf("%d frames in %d bytes: %v, want %v", c.frames, n, got, c.want)
		}
	}
}
