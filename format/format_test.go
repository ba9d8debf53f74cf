package format

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSniffFiles: every bundled form is what it is, by content.
func TestSniffFiles(t *testing.T) {
	for path, want := range map[string]Kind{
		"snapshots/MAGMA27_assignment2-systems__memory_snapshot.pickle": Snapshot,
		"snapshots/h100/gpt_adamw.pickle.gz":                            Snapshot,
		"snapshots/synthetic/base.html":                                 Snapshot,
		"snapshots/synthetic/base.json":                                 Snapshot,
		"snapshots/synthetic/proto2.pickle":                             Snapshot,
		"snapshots/synthetic/legacy_list.pickle":                        Snapshot,
		"snapshots/h100/gpt_adamw.truth.json":                           Unknown,
		"estimates/WRITER_tiny_gpt_cpu_peak_snapshot.json":              Estimate,
		"traces/logs/megatron_logger.log":                               MegatronLog,
		"traces/logs/megatron_theory_only.log":                          MegatronLog,
		"traces/logs/titan_default.log":                                 TitanLog,
		"traces/logs/titan_srun.log":                                    TitanLog,
		"traces/titan/collector_rank2_memory.json":                      TitanExport,
		"traces/titan/memory_tracker_rank1.json":                        TitanExport,
		"reference/report_snapshots.json":                               Unknown, // memscope's own report: a "segments" count
	} {
		got, err := SniffFile(filepath.Join("../testdata", path))
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", path, got, err, want)
		}
	}
	megatron, _ := filepath.Glob("../testdata/traces/megatron_trace_memory/real/*.json")
	if len(megatron) == 0 {
		t.Fatal("no Megatron traces")
	}
	for _, p := range megatron {
		if got, _ := SniffFile(p); got != MegatronTrace {
			t.Errorf("%s: %q, want a Megatron trace", p, got)
		}
	}
}

// TestEmptyObject: {} is the profiler's empty estimate, except in a file
// named like Megatron's tracker, which writes {} before its first
// iteration.
func TestEmptyObject(t *testing.T) {
	dir := t.TempDir()
	for name, want := range map[string]Kind{"peak_snapshot.json": Estimate, "memory_trace_rank0.json": MegatronTrace} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(" { }\n"), 0o644)
		if got, _ := SniffFile(p); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestLateLogLine: a log whose first memory line comes after megabytes of
// start-up output is still a log; the same text without one is not.
func TestLateLogLine(t *testing.T) {
	dir := t.TempDir()
	preamble := strings.Repeat("NCCL INFO some start-up line that says nothing about memory\n", 200000) // 12 MB
	line := "[rank0]:[titan] step:  1  loss: 12.2  memory: 27.34GiB(28.78%)  tps: 375\n"
	for _, c := range []struct {
		body string
		want Kind
	}{{preamble + line, TitanLog}, {preamble, Unknown}, {line, TitanLog}} {
		p := filepath.Join(dir, "train.log")
		os.WriteFile(p, []byte(c.body), 0o644)
		if got, _ := SniffFile(p); got != c.want {
			t.Errorf("%d bytes: %q, want %q", len(c.body), got, c.want)
		}
		// SniffHead reads 64 KiB only: a late line is not its business.
		want := c.want
		if len(c.body) > HeadSize {
			want = Unknown
		}
		if got, _ := SniffHead(p); got != want {
			t.Errorf("SniffHead, %d bytes: %q, want %q", len(c.body), got, want)
		}
	}
}

// TestSniffHeads: the marks of each form, and the near misses.
func TestSniffHeads(t *testing.T) {
	for _, c := range []struct {
		head string
		want Kind
	}{
		{"\x80\x04\x95", Snapshot},
		{"\x80\x01", Unknown}, // protocol 1: not a snapshot
		{"\x1f\x8b\x08", Snapshot},
		{`{"segments": [], "device_traces": []}`, Snapshot},
		{`{"segments": 3}`, Unknown},
		{`[{"total_size": 2097152}]`, Snapshot},
		{`{"peak_memory_mb": 1.0}`, Estimate},
		{`{"0": {"samples": [{"timestamp_s": 1}]}}`, MegatronTrace},
		{`[{"step": 1, "device_mem_stats": {}}]`, TitanExport},
		{"[Rank 3] (after 10 iterations) memory (MB) | allocated: 9554.87", MegatronLog},
		{"\x1b[32mstep:  1\x1b[0m  memory: 27.34GiB(28.78%)", TitanLog},
		{"step: 1 memory: 27.34GiB\x00", Unknown}, // binary
		{"", Unknown},
	} {
		if got := Sniff([]byte(c.head)); got != c.want {
			t.Errorf("Sniff(%q) = %q, want %q", c.head, got, c.want)
		}
	}
}

// TestSnapshotHead: the snapshot forms are judged by the first 16 KiB; a
// JSON whose snapshot keys come later is not taken for a snapshot.
func TestSnapshotHead(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		pad  int
		want Kind
	}{{snapshotHead - 64, Snapshot}, {snapshotHead + 64, Unknown}} {
		body := `{"pad": "` + strings.Repeat("x", c.pad) + `", "segments": [], "device_traces": []}`
		p := filepath.Join(dir, "s.json")
		os.WriteFile(p, []byte(body), 0o644)
		if got, _ := SniffFile(p); got != c.want {
			t.Errorf("snapshot keys after %d bytes: %q, want %q", c.pad, got, c.want)
		}
	}
}

// TestSniffTorchSave: the first local header of a zip archive says
// whether it is torch.save's (data.pkl first, at the root or in one
// folder) and its pickle's first bytes whether it saved a snapshot,
// stored or deflated; a header cut short, a name past the head, a
// deeper data.pkl and a pickle past the head say no more than they can.
func TestSniffTorchSave(t *testing.T) {
	member := func(name string, method uint16, data []byte) []byte {
		var b bytes.Buffer
		w := zip.NewWriter(&b)
		f, err := w.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err == nil {
			_, err = f.Write(data)
		}
		if err == nil {
			err = w.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	snap := []byte("\x80\x02}q\x00(X\x08\x00\x00\x00segmentsq\x01]q\x02")
	other := []byte("\x80\x02}q\x00(X\x06\x00\x00\x00weightq\x01K\x01u.")
	stored := member("s/data.pkl", zip.Store, snap)
	for _, c := range []struct {
		name string
		head []byte
		want TorchSave
	}{
		{"not a zip", snap, NotZip},
		{"stored snapshot", stored, SavedSnapshot},
		{"deflated snapshot", member("s/data.pkl", zip.Deflate, snap), SavedSnapshot},
		{"at the root", member("data.pkl", zip.Store, snap), SavedSnapshot},
		{"a checkpoint", member("m/data.pkl", zip.Store, other), SavedOther},
		{"deeper", member("a/b/data.pkl", zip.Store, snap), OtherZip},
		{"another member first", member("notes.txt", zip.Store, snap), OtherZip},
		{"header cut short", stored[:zipLocalHeader-1], OtherZip},
		{"name past the head", stored[:zipLocalHeader+4], OtherZip},
		{"pickle past the head", stored[:zipLocalHeader+len("s/data.pkl")], SavedOther},
	} {
		if got := SniffTorchSave(c.head); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// The keys are looked for in data.pkl's first torchPeek bytes: ending
	// at its last byte, and one byte past it.
	for _, c := range []struct {
		end  int
		want TorchSave
	}{{torchPeek, SavedSnapshot}, {torchPeek + 1, SavedOther}} {
		pkl := append([]byte("\x80\x02"), bytes.Repeat([]byte{'N'}, c.end-2-len("segments"))...)
		pkl = append(pkl, "segments"...)
		if got := SniffTorchSave(member("s/data.pkl", zip.Store, pkl)); got != c.want {
			t.Errorf("keys ending at byte %d: %v, want %v", c.end, got, c.want)
		}
	}
	if Sniff(stored) != Snapshot || Sniff(member("m/data.pkl", zip.Store, other)) != Unknown {
		t.Errorf("Sniff: a saved snapshot is a snapshot, a saved checkpoint nothing")
	}
}
