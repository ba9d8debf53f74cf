package pickle

import (
	"context"
	"encoding/binary"
	"fmt"

	"memscope/snapshot/schema"
)

// Stream is a pickle that is still arriving while it is decoded: a gzip
// member inflating on another goroutine into Buf. Decoding it as it comes
// keeps only a window of the inflated bytes in memory, where inflating
// first held all of them (190 MB for bigtrain's 9 MB .gz, 0.40x
// pickle.load's peak) and decoded only afterwards.
type Stream struct {
	// Buf receives the input: Buf[:n] is final once Wait has returned n.
	Buf []byte
	// Wait blocks until at least n bytes are final, or the input is
	// complete, and returns how many are final. An error (the input
	// cannot be read, or the load was cancelled) ends the decode.
	Wait func(n int) (int, error)
	// Size is the size the input is expected to have, for progress only
	// (0: unknown).
	Size int
	// Keep is how far behind what drop was last given Buf stays as it
	// arrived: the machine reads nothing further back (a list is compared
	// with the one before only within it).
	Keep int
}

// streamHead is how much of a stream Framed needs: PROTO and the first
// FRAME's opcode.
const streamHead = 3

// frameHeader is a FRAME opcode and its 8-byte length.
const frameHeader = 9

// Framed reports whether head, the start of a pickle, is protocol 4 or
// later with its opcodes in frames: the form DecodeStream reads as it
// arrives. Anything else is decoded once it has all arrived.
func Framed(head []byte) bool {
	return len(head) >= streamHead && head[0] == opProto && head[1] >= 4 && head[2] == opFrame
}

// DecodeStream decodes a framed snapshot pickle (see Framed) as it arrives,
// on one machine: a frame is decoded once all of it is there (pickle never
// splits an opcode between frames), and a large object written outside the
// frames waits for the whole input. drop is called, as for DecodeMapped,
// with ranges the machine has read past; nothing decoded refers to Buf, and
// once this returns nothing reads it. An error wrapping ErrStacksAlike asks
// for the input to be decoded again from its start, another way.
func DecodeStream(ctx context.Context, s *Stream, drop func(from, to int), progress func(float64)) (*schema.Snapshot, error) {
	n, err := s.Wait(streamHead)
	if err != nil {
		return nil, err
	}
	if !Framed(s.Buf[:n]) {
		return nil, fmt.Errorf("not a framed pickle (protocol 4 or later): %w", ErrNotSnapshot)
	}
	// The machine starts with PROTO alone; more gives it each frame.
	d, root, err := decodeWith(ctx, s.Buf[:2], progress, nil, drop, &offHeapPool{}, s.machine)
	if err != nil {
		return nil, err
	}
	// As decodeSnapshot binds, its collections included (d is not used
	// after this: its memo and stack are garbage for them).
	return bindDecoded(d.g, root, d.streamed)
}

// more makes the next frame of a stream the machine's input, when run has
// reached the end of what it had (d.end == len(d.data)); false when the
// input has ended.
func (d *decoder) more() (bool, error) {
	s, at := d.stream, len(d.data)
	if d.end != at {
		return false, nil
	}
	n, err := s.Wait(at + frameHeader)
	if err != nil {
		return false, err
	}
	if n <= at {
		return false, nil // the input ends here
	}
	var size uint64
	if n >= at+frameHeader && s.Buf[at] == opFrame {
		size = binary.LittleEndian.Uint64(s.Buf[at+1:])
	}
	if size > 0 && size <= uint64(len(s.Buf)-at-frameHeader) {
		// A frame: decoded once all of it is there (or all there is,
		// when the input ends inside it).
		end := at + frameHeader + int(size)
		n, err = s.Wait(end)
		n = min(n, end)
	} else {
		// Outside the frames (a large string, written whole), an empty
		// frame, or one longer than the input can be: the rest, once it
		// is all there.
		n, err = s.Wait(len(s.Buf))
	}
	if err != nil {
		return false, err
	}
	d.data, d.end, d.streamed = s.Buf[:n], n, n
	return true, nil
}

// inputSize is the size of the input the machine reads: all of it, or a
// stream's expected size.
func (d *decoder) inputSize() int {
	if d.stream != nil && d.stream.Size > 0 {
		return d.stream.Size
	}
	return len(d.data)
}

// machine makes d a machine that reads s: the list before is compared only
// within Keep bytes (spanCache.keep; 1 when nothing is kept).
func (s *Stream) machine(d *decoder) { d.stream, d.spans.keep = s, max(1, s.Keep) }
