package pickle

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"memscope/internal/budget"

	"memscope/internal/jsonscan"
)

// jsonSnapshot is a snapshot in JSON: a segment, and a trace of n entries
// whose frame lists hold 1 to depth frames.
func jsonSnapshot(n, depth int) []byte {
	var b strings.Builder
	b.WriteString(`{"segments": [{"device": 0, "address": 4096, "total_size": 1048576, "stream": 0, "segment_type": "large", "blocks": []}], "device_traces": [[`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"action": "alloc", "addr": %d, "size": 512, "stream": 0, "time_us": %d, "frames": [`, 4096+512*i, 1000+i)
		for k := range 1 + i%depth {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"filename": "/src/m%d.py", "line": %d, "name": "f%d"}`, k%5, 10+k, i%7)
		}
		b.WriteString("]}")
	}
	b.WriteString("]]}")
	return []byte(b.String())
}

// TestJSONBatches: values of an array or object longer than its batch move
// from the stack to the container as they come; the snapshot binds the
// same whatever the batch (every list and dict moved, as with a batch of
// 2, or none), and the stack stays shorter than the trace list.
func TestJSONBatches(t *testing.T) {
	data := jsonSnapshot(300, 9)
	decode := func(batch int) (*decoder, val) {
		d := newDecoder(data)
		d.jsonBatch = batch
		root, err := d.fromJSON(jsonscan.New(data))
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		return d, root
	}
	ref, root := decode(1 << 30)
	want, err := newBinder(ref.g, len(data)).bindRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Trace(0)) != 300 || cap(ref.stack) < 300 {
		t.Fatalf("%d trace entries, a stack of %d: want 300 on the stack at once", len(want.Trace(0)), cap(ref.stack))
	}
	for _, batch := range []int{2, 3, 8, jsonBatch} {
		d, root := decode(batch)
		got, err := newBinder(d.g, len(data)).bindRoot(root)
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		canonStacks(got)
		w := *want
		canonStacks(&w)
		if !reflect.DeepEqual(got.Traces, w.Traces) || !reflect.DeepEqual(got.Segments, w.Segments) {
			t.Errorf("batch %d: the snapshot differs from the one read without batches", batch)
		}
		if batch < 300 && cap(d.stack) >= cap(ref.stack) {
			t.Errorf("batch %d: the stack grew to %d values, as without batches", batch, cap(d.stack))
		}
	}
}

// TestJSONBudget: the JSON reader refuses nesting past maxMarks and values
// past the pickle machine's budget, on each side of both limits.
func TestJSONBudget(t *testing.T) {
	sc := jsonscan.New([]byte("[]"))
	for _, c := range []struct {
		depth int
		ok    bool
	}{{maxMarks, true}, {maxMarks + 1, false}} {
		d := newDecoder(make([]byte, 100))
		if err := d.checkJSON(sc, c.depth); (err == nil) != c.ok {
			t.Errorf("depth %d: %v", c.depth, err)
		}
	}
	// Containers up to the budget of an input of n bytes, then one more.
	const n = 1 << 20
	limit := budget.Limit(n)
	d := newDecoder(make([]byte, n))
	for d.cost(0)+24 <= limit {
		d.g.conts.push(container{})
	}
	if err := d.checkJSON(sc, 0); err != nil {
		t.Errorf("at %d of %d bytes: %v", d.cost(0), limit, err)
	}
	d.g.conts.push(container{})
	if err := d.checkJSON(sc, 0); err == nil || !strings.Contains(err.Error(), "decoding needs more than") {
		t.Errorf("at %d of %d bytes: %v", d.cost(0), limit, err)
	}
}

// TestHostileJSON: the shapes that held gigabytes before the budget (many
// empty objects in a list, brackets opened and never closed) are refused
// by it, early in the input; a cancelled context stops a read.
func TestHostileJSON(t *testing.T) {
	wide := []byte(`{"segments": [` + strings.Repeat("{}, ", 6<<20) + `{}]}`)
	deep := []byte(`{"segments": ` + strings.Repeat("[", 1<<20))
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"empty objects": {wide, "decoding needs more than"},
		"open brackets": {deep, "nest more than"},
	} {
		_, err := DecodeJSON(context.Background(), c.data, nil, nil)
		var je *jsonscan.Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &je) || je.Offset > len(c.data)*3/4 {
			t.Errorf("%s: %v", name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DecodeJSON(ctx, jsonSnapshot(20000, 3), nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
