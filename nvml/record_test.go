package nvml

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"memscope/internal/fullfs"
	"memscope/trace"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRecordFullDisk: a recording whose disk is full keeps sampling into
// memory, says so, and once space returns writes every sample: none is
// lost, and the file reads as a trace while the recording goes on.
func TestRecordFullDisk(t *testing.T) {
	dir := t.TempDir()
	var full atomic.Bool
	full.Store(true)
	var log syncBuffer
	opt := RecordOptions{OutDir: dir, Interval: 10 * time.Millisecond, Duration: 900 * time.Millisecond,
		FlushEvery: 30 * time.Millisecond, Log: &log,
		open: func(p string) (trace.AppendFile, error) {
			f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			return fullfs.File{File: f, Full: &full}, err
		}}
	done := make(chan error, 1)
	go func() { done <- Record(context.Background(), &stepSource{n: 1, start: time.Now()}, opt) }()
	time.Sleep(300 * time.Millisecond)
	path := filepath.Join(dir, "memory_trace_rank0.json")
	if data, err := os.ReadFile(path); err != nil || len(data) != 0 {
		t.Fatalf("a disk full from the start: nothing written yet (%d bytes, %v)", len(data), err)
	}
	full.Store(false)
	time.Sleep(200 * time.Millisecond)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := trace.ParseMegatron(path, data)
	if err != nil || len(r.Iterations[0].T) < 20 {
		t.Fatalf("once space returns the kept samples are written, mid-recording: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	set, err := trace.LoadDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	it := set.Ranks[0].Iterations[0]
	// stepSource's round k reads k MiB used: every round is there, in order.
	for i := range it.T {
		if it.Reserved[i] != float64(i+1) {
			t.Fatalf("sample %d reads %v MiB, want %d: a sample was lost or reordered", i, it.Reserved[i], i+1)
		}
	}
	if len(it.T) < 50 {
		t.Errorf("%d samples in 0.9 s at 10 ms", len(it.T))
	}
	if l := log.String(); !strings.Contains(l, "writing failed") || !strings.Contains(l, "writing works again") {
		t.Errorf("the log says neither the failure nor the recovery:\n%s", l)
	}
}

// TestRecordKeepsAtMostMaxPending: when the disk never returns, at most
// MaxPending samples per GPU are kept, the newest, and the end says how
// many could not be written.
func TestRecordKeepsAtMostMaxPending(t *testing.T) {
	var full atomic.Bool
	full.Store(true)
	var log syncBuffer
	err := Record(context.Background(), &stepSource{n: 1, start: time.Now()}, RecordOptions{OutDir: t.TempDir(),
		Interval: 5 * time.Millisecond, Duration: 300 * time.Millisecond, FlushEvery: 20 * time.Millisecond, Log: &log, MaxPending: 10,
		open: func(p string) (trace.AppendFile, error) {
			f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			return fullfs.File{File: f, Full: &full}, err
		}})
	if err == nil || !strings.Contains(err.Error(), "10 samples could not be written") {
		t.Errorf("got %v, want the 10 kept samples named", err)
	}
	if !strings.Contains(log.String(), "were dropped while the disk refused them") {
		t.Errorf("log:\n%s", log.String())
	}
}
