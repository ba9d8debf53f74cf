package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
)

// The long arrays of a JSON report, written as they are encoded: a model
// annotated in every layer has a stage for each layer and step, a hundred
// thousand (64 MB of indented JSON), and a snapshot of 200k live blocks as
// many allocations with --allocations. encoding/json built the whole
// report in a buffer that doubled as it grew: its copies and fresh pages
// were two thirds of the report's time, and its peak 280 MB against 120
// for the text. The arrays leave the value encoding/json encodes, their
// keys kept with no elements; each is then encoded a chunk at a time on
// every core into the indented output where its key is.

// streamed is an array taken out of a report's value: the key it left
// with no elements, and its n elements, encoded by encode.
type streamed struct {
	key    []byte
	n      int
	encode func(enc *json.Encoder, i int) error
}

// The keys the arrays leave: in compact JSON these bytes are the key and
// an empty array only (within a string a quote is escaped), and no other
// "allocations" (the counts named so) has an array.
var (
	stagesKey = []byte(`"stages":[]`)
	allocsKey = []byte(`"allocations":[]`)
)

// takeArrays takes the devices' stages and allocations out of out, in the
// order they are written (a device's stages before its allocations),
// leaving their keys with no elements.
func takeArrays(out *jsonReport) []streamed {
	var arrays []streamed
	for i := range out.Files {
		devs, ok := out.Files[i].Devices.([]jsonDevice)
		if !ok {
			continue
		}
		devs = slices.Clone(devs) // a prepared report may be written again
		for k := range devs {
			st := devs[k].Stages
			arrays = append(arrays, streamed{key: stagesKey, n: len(st), encode: func(enc *json.Encoder, i int) error { return enc.Encode(&st[i]) }})
			devs[k].Stages = []jsonStage{}
			if all, ok := devs[k].Allocations.([]jsonAlloc); ok {
				arrays = append(arrays, streamed{key: allocsKey, n: len(all), encode: func(enc *json.Encoder, i int) error { return enc.Encode(&all[i]) }})
				devs[k].Allocations = json.RawMessage("[]")
			}
		}
		out.Files[i].Devices = devs
	}
	return arrays
}

// arrayChunk is how many elements a goroutine of writeArrays encodes at a
// time.
const arrayChunk = 256

// writeArrays writes compact, indented, with the arrays' elements in place
// of their keys' empty arrays, chunk elements encoded at a time.
func writeArrays(in *indentWriter, compact []byte, arrays []streamed, chunk int) error {
	for _, key := range [][]byte{stagesKey, allocsKey} {
		want := 0
		for _, a := range arrays {
			if bytes.Equal(a.key, key) {
				want++
			}
		}
		if got := bytes.Count(compact, key); got != want {
			return fmt.Errorf("report: %d arrays for %d %s in the JSON", want, got, key)
		}
	}
	for _, a := range arrays {
		k := bytes.Index(compact, a.key) + len(a.key) - 1 // at the ]
		in.write(compact[:k])
		if err := in.elements(a, chunk); err != nil {
			return err
		}
		compact = compact[k:]
	}
	in.write(compact)
	return in.close()
}

// elements writes a's elements into the array just opened, encoded and
// indented a chunk at a time on every core, and written in order.
func (in *indentWriter) elements(a streamed, chunk int) error {
	if a.n == 0 {
		return nil
	}
	n := (a.n + chunk - 1) / chunk
	workers := min(runtime.GOMAXPROCS(0), n)
	type encoded struct {
		b   []byte
		err error
	}
	out := make([]chan encoded, n)
	for c := range out {
		out[c] = make(chan encoded, 1)
	}
	// A chunk takes a slot before its number, so that the slots held are
	// always the lowest chunks not written yet: chunk after chunk waits
	// for the one written next, never the reverse.
	slots, done := make(chan struct{}, 2*workers), make(chan struct{})
	defer close(done)
	// A written chunk's buffer goes to the next chunk encoded: each was
	// fresh memory, garbage that a report (which collects late) kept.
	free := make(chan []byte, 2*workers)
	var next atomic.Int64
	indent, depth := in.indent, in.depth
	for range workers {
		go func() {
			var one bytes.Buffer
			enc := json.NewEncoder(&one)
			for {
				select {
				case slots <- struct{}{}:
				case <-done:
					return
				}
				c := int(next.Add(1)) - 1
				if c >= n {
					return
				}
				var buf []byte
				select {
				case buf = <-free:
				default:
				}
				// Each element begins a line at the array's depth; the
				// first comes right after the [.
				ind := indenter{indent: indent, depth: depth, open: c == 0, dst: buf[:0]}
				var err error
				for i := c * chunk; i < min(a.n, (c+1)*chunk) && err == nil; i++ {
					if i > 0 {
						ind.write([]byte{','})
					}
					one.Reset()
					if err = a.encode(enc, i); err == nil {
						ind.write(bytes.TrimSuffix(one.Bytes(), []byte{'\n'}))
					}
				}
				out[c] <- encoded{ind.dst, err}
			}
		}()
	}
	for c := range n {
		e := <-out[c]
		if e.err != nil {
			return e.err
		}
		in.raw(e.b)
		free <- e.b
		<-slots
	}
	in.open = false
	return nil
}
