package snapshot

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"memscope/format"
)

// torchSaveArchive writes what torch.save writes for a dict with no
// tensors: a zip archive whose members live in a folder named after the
// file, data.pkl (the pickle, protocol 2) first and stored, its data
// aligned to 64 bytes by an extra field of 'Z's (PyTorch's "FB" field),
// then byteorder, version and the serialization id. method is data.pkl's.
func torchSaveArchive(t testing.TB, pkl []byte, method uint16, name string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, m := range []struct {
		name   string
		data   []byte
		method uint16
	}{
		{name, pkl, method},
		{"snapshot/byteorder", []byte("little"), zip.Store},
		{"snapshot/version", []byte("3\n"), zip.Store},
		{"snapshot/.data/serialization_id", []byte("1234567890"), zip.Store},
	} {
		h := &zip.FileHeader{Name: m.name, Method: m.method}
		if m.name == name {
			// First in the archive: its data starts after the 30-byte
			// header, its name and the 4 bytes of the field's own header.
			pad := (64 - (30+len(name)+4)%64) % 64
			h.Extra = append([]byte{'F', 'B', byte(pad), 0}, bytes.Repeat([]byte{'Z'}, pad)...)
		}
		f, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestTorchSaveArchive: torch.save(torch.cuda.memory._snapshot(), path)
// reads as the pickle in it reads, data.pkl stored (as torch.save writes
// it) or deflated (an archive made again by another tool), in the folder
// torch.save names after the file or at the root, and the sniff says
// snapshot. An archive of something else (a checkpoint), one without
// data.pkl, one cut short and one whose data.pkl inflates past the limit
// are errors that say so; none of them is sniffed as a snapshot.
func TestTorchSaveArchive(t *testing.T) {
	pkl, err := os.ReadFile("../testdata/snapshots/synthetic/proto2.pickle")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Decode(context.Background(), pkl)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		member string
		method uint16
	}{
		{"stored", "snapshot/data.pkl", zip.Store},
		{"deflated", "snapshot/data.pkl", zip.Deflate},
		{"at the root", "data.pkl", zip.Store},
	} {
		data := torchSaveArchive(t, pkl, c.method, c.member)
		if k := format.Sniff(data[:min(len(data), format.HeadSize)]); k != format.Snapshot {
			t.Errorf("%s: sniffed as %v", c.name, k)
		}
		s, err := Decode(ctx, data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.Format != "torch.save archive (pickle protocol 2)" {
			t.Errorf("%s: format %q", c.name, s.Format)
		}
		got, exp := Analyze(s, nil), Analyze(want, nil)
		if len(got.Devices) != len(exp.Devices) || len(got.Devices) == 0 {
			t.Fatalf("%s: %d devices, want %d", c.name, len(got.Devices), len(exp.Devices))
		}
		for i := range got.Devices {
			g, e := got.Devices[i], exp.Devices[i]
			if g.ReservedBytes != e.ReservedBytes || g.AllocatedBytes != e.AllocatedBytes || g.Peak.Active != e.Peak.Active || len(g.Allocations) != len(e.Allocations) {
				t.Errorf("%s: device %d: %+v, want %+v", c.name, i, g.Peak, e.Peak)
			}
		}
	}

	checkpoint := []byte("\x80\x02}q\x00X\x06\x00\x00\x00weightq\x01K\x01s.") // {'weight': 1}
	full := torchSaveArchive(t, pkl, zip.Store, "snapshot/data.pkl")
	var other bytes.Buffer
	w := zip.NewWriter(&other)
	f, _ := w.Create("notes.txt")
	f.Write([]byte("hello"))
	w.Close()
	for _, c := range []struct {
		name  string
		data  []byte
		sniff format.TorchSave
		err   string
	}{
		{"a checkpoint", torchSaveArchive(t, checkpoint, zip.Store, "model/data.pkl"), format.SavedOther, "torch.save archive, data.pkl:"},
		{"no data.pkl", other.Bytes(), format.OtherZip, "without data.pkl"},
		{"cut short", full[:len(full)/2], format.SavedSnapshot, "zip archive:"},
		{"data.pkl deeper", torchSaveArchive(t, pkl, zip.Store, "a/b/data.pkl"), format.OtherZip, "without data.pkl"},
	} {
		if got := format.SniffTorchSave(c.data); got != c.sniff {
			t.Errorf("%s: sniffed %v, want %v", c.name, got, c.sniff)
		}
		_, err := Decode(ctx, c.data)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
		}
	}

	// A deflated data.pkl inflates no further than a gzip input may:
	// 8 MiB that barely compress, past one limit and within the other.
	noise := make([]byte, 8<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	bomb := torchSaveArchive(t, append(bytes.Clone(pkl), noise...), zip.Deflate, "snapshot/data.pkl")
	for _, c := range []struct {
		limit int64
		fails bool
	}{{4 << 20, true}, {64 << 20, false}} {
		_, err := Decode(WithInflateMax(ctx, c.limit), bomb)
		if refused := err != nil && strings.Contains(err.Error(), "refusing"); refused != c.fails {
			t.Errorf("limit %d MiB: %v", c.limit>>20, err)
		}
	}

	// Through Open, as a file: as read as a pickle file of it is.
	path := filepath.Join(t.TempDir(), "snapshot.pt")
	if err := os.WriteFile(path, full, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, path); err != nil {
		t.Errorf("Open: %v", err)
	}
	if _, err := Decode(ctx, torchSaveArchive(t, []byte("not a pickle"), zip.Store, "x/data.pkl")); !errors.Is(err, ErrNotSnapshot) {
		t.Errorf("data.pkl that is no pickle: %v", err)
	}
}

// TestTorchSaveMapped: an archive of mapMin bytes or more is read where
// its stored data.pkl lies in the mapped file (openMapped takes it), with
// the snapshot its pickle gives; deflated, it is left to the reading of
// the whole file, which inflates it, with the same snapshot. A stored
// data.pkl that is no pickle is an error that says so.
func TestTorchSaveMapped(t *testing.T) {
	pk, _ := bigPickle(mapMin + 4096)
	want, err := Decode(context.Background(), pk)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		method uint16
		mapped bool
	}{{"stored", zip.Store, true}, {"deflated", zip.Deflate, false}} {
		path := filepath.Join(dir, c.name+".pt")
		if err := os.WriteFile(path, torchSaveArchive(t, pk, c.method, "s/data.pkl"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err, ok := openMapped(context.Background(), path, nil)
		if ok != c.mapped && runtime.GOOS == "linux" {
			t.Errorf("%s: mapped %v, want %v (%v)", c.name, ok, c.mapped, err)
		}
		if !ok {
			s, err = Open(context.Background(), path)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, exp := Analyze(s, nil).Devices, Analyze(want, nil).Devices
		if len(got) != len(exp) || len(got) == 0 || got[0].ReservedBytes != exp[0].ReservedBytes ||
			got[0].TraceEntries != exp[0].TraceEntries || got[0].Peak.Active != exp[0].Peak.Active || got[0].Peak.EventIndex != exp[0].Peak.EventIndex {
			t.Errorf("%s: not the pickle's snapshot", c.name)
		}
	}
	// Mapped, a stored data.pkl that is no pickle is named so.
	path := filepath.Join(dir, "notpickle.pt")
	if err := os.WriteFile(path, torchSaveArchive(t, bytes.Repeat([]byte("x"), mapMin), zip.Store, "s/data.pkl"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err, ok := openMapped(context.Background(), path, nil); runtime.GOOS == "linux" && (!ok || !errors.Is(err, ErrNotSnapshot)) {
		t.Errorf("a data.pkl that is no pickle, mapped: %v, %v", err, ok)
	}
}

// TestReadLimited: all of a reader up to the limit, from a hint under,
// at and over what comes, never holding room for more than the limit and
// a byte; a byte more is refused; a reader's error is passed on.
func TestReadLimited(t *testing.T) {
	const limit = 1000
	for _, c := range []struct {
		n, hint int64
		err     error
	}{
		{0, 0, nil}, {1, 0, nil}, {999, 10, nil}, {limit, 1, nil}, {limit, limit, nil},
		{limit, 5 * limit, nil}, {limit + 1, 1, errPastLimit}, {limit + 1, 5 * limit, errPastLimit}, {3 * limit, 64, errPastLimit},
	} {
		data := bytes.Repeat([]byte{7}, int(c.n))
		out, err := readLimited(iotest.OneByteReader(bytes.NewReader(data)), c.hint, limit)
		if !errors.Is(err, c.err) || err == nil && !bytes.Equal(out, data) || cap(out) > limit+1 {
			t.Errorf("%d bytes, hint %d: %d bytes (room %d), %v; want %v", c.n, c.hint, len(out), cap(out), err, c.err)
		}
	}
	if _, err := readLimited(iotest.ErrReader(io.ErrUnexpectedEOF), 10, limit); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a failing reader: %v", err)
	}
}
