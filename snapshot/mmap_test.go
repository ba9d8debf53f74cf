package snapshot

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestOpenAroundMapMin: pickles and JSON snapshots under mapMin are read,
// larger ones mapped (a JSON one also after leading whitespace and a
// byte-order mark); each opens to what its bytes decode to from memory,
// and a copy cut short is refused with the file's name either way.
func TestOpenAroundMapMin(t *testing.T) {
	dir := t.TempDir()
	for _, form := range []struct {
		ext, truncated string
		gen            func(int) ([]byte, int)
		leads          []string
	}{
		{".pickle", "data ends", bigPickle, []string{""}},
		{".json", "truncated", bigJSON, []string{"", " \n\t\xef\xbb\xbf "}},
	} {
		for _, size := range []int{mapMin - 4096, mapMin + 4096} {
			body, n := form.gen(size)
			if (len(body) >= mapMin) != (size >= mapMin) {
				t.Fatalf("%s: generator missed its side of the threshold: %d bytes for %d", form.ext, len(body), size)
			}
			for _, lead := range form.leads {
				data := append([]byte(lead), body...)
				path := filepath.Join(dir, fmt.Sprintf("s%d%s", len(data), form.ext))
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				want, err := Decode(context.Background(), append([]byte(nil), data...))
				if err != nil {
					t.Fatal(err)
				}
				got, err := Open(context.Background(), path)
				if err != nil {
					t.Fatalf("%s, %d bytes: %v", form.ext, len(data), err)
				}
				if len(got.Trace(0)) != n || !reflect.DeepEqual(got.Traces, want.Traces) || !reflect.DeepEqual(got.Segments, want.Segments) || got.Format != want.Format {
					t.Errorf("%s, %d bytes (lead %q): the file opens to another snapshot than its bytes decode to", form.ext, len(data), lead)
				}
				if _, err, mapped := openMapped(context.Background(), path, nil); mapped != (len(data) >= mapMin) || err != nil {
					t.Errorf("%s, %d bytes (lead %q): mapped %v (%v), want %v", form.ext, len(data), lead, mapped, err, len(data) >= mapMin)
				}
			}
			trunc := filepath.Join(dir, "trunc"+form.ext)
			if err := os.WriteFile(trunc, body[:len(body)-100], 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(context.Background(), trunc); err == nil || !strings.Contains(err.Error(), trunc) || !strings.Contains(err.Error(), form.truncated) {
				t.Errorf("%s, %d bytes, truncated: %v", form.ext, len(body), err)
			}
		}
	}
}

// TestMappedFileTruncatedWhileDecoding: a file cut short by another
// program while it is mapped makes reads past its new end fault (SIGBUS);
// the decoder reports that as an error instead of dying, for a pickle and
// for a JSON snapshot.
func TestMappedFileTruncatedWhileDecoding(t *testing.T) {
	pk, _ := bigPickle(mapMin + 4096)
	js, _ := bigJSON(mapMin + 4096)
	for _, c := range []struct {
		name   string
		data   []byte
		decode func(mapped []byte, unmap func(), f *os.File) (*Snapshot, error)
	}{
		{"pickle", pk, func(m []byte, unmap func(), f *os.File) (*Snapshot, error) {
			return decodeMapped(context.Background(), m, unmap, f.ReadAt, nil, dropPages(m))
		}},
		{"torch.save", torchSaveArchive(t, pk, zip.Store, "s/data.pkl"), func(m []byte, unmap func(), f *os.File) (*Snapshot, error) {
			s, err, _ := decodeMappedTorchSave(context.Background(), m, unmap, f.ReadAt, nil)
			return s, err
		}},
		{"json", js, func(m []byte, unmap func(), _ *os.File) (*Snapshot, error) {
			return decodeMappedJSON(context.Background(), m, 0, unmap, nil)
		}},
	} {
		path := filepath.Join(t.TempDir(), "s")
		if err := os.WriteFile(path, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		mapped, unmap, err := mapFile(f, len(c.data))
		if err != nil {
			f.Close()
			t.Skipf("memory-mapping is not available on this system (the reader falls back to reading the file): %v", err)
		}
		if err := f.Truncate(1 << 20); err != nil {
			t.Fatal(err)
		}
		s, err := c.decode(mapped, unmap, f)
		f.Close()
		if err == nil || !strings.Contains(err.Error(), "changed while it was read") {
			t.Fatalf("%s: got %v, %v; want an error saying the file changed", c.name, s, err)
		}
	}
}

// TestFileChangedMidDecode rewrites or truncates a mapped pickle large
// enough for two decoding machines (≥ parallelMin, written by
// pickle.dump) while Open decodes it, at several moments: the decode ends
// with a snapshot or an error, never a crash (a fault on either machine's
// goroutine would kill the process). The same for its .gz, read as it
// inflates, for torch.save's archive of it, read where it lies, for the
// same shape in protocol 2 (no frames), and for a trace as PyTorch's C++
// pickler writes it (one batch). Run under -race in CI.
func TestFileChangedMidDecode(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: the file is written by pickle.dump")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src.pickle")
	if out, err := exec.Command("python3", "../scripts/gen_snapshot.py", "--entries", "40000", "--frames", "unshared",
		"--depth", "20", src).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 12<<20 {
		t.Fatalf("%d bytes: under the size that maps the file and splits the decode", len(data))
	}
	plain := data
	for _, ext := range []string{"", ".gz", ".pt"} {
		switch ext {
		case ".gz":
			data = gz(t, plain)
		case ".pt":
			data = torchSaveArchive(t, plain, zip.Store, "s/data.pkl")
		}
		changeMidDecode(t, dir, ext, data)
	}
	// Protocol 2: no frames; the helpers find their region in the bytes
	// and walk the opcodes to their prefix's end, reading the mapping.
	src2 := filepath.Join(dir, "src2.pickle")
	if out, err := exec.Command("python3", "../scripts/gen_snapshot.py", "--entries", "40000", "--frames", "unshared",
		"--depth", "20", "--protocol", "2", src2).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if data, err = os.ReadFile(src2); err != nil {
		t.Fatal(err)
	}
	changeMidDecode(t, dir, "", data)
	// PyTorch's C++ pickler's layout: the trace in one batch, where the
	// helpers start inside it.
	src3 := filepath.Join(dir, "src3.pickle")
	if out, err := exec.Command("python3", "../scripts/gen_cpp_snapshot.py", "300000", src3, "-", "300").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if data, err = os.ReadFile(src3); err != nil {
		t.Fatal(err)
	}
	if len(data) < 12<<20 {
		t.Fatalf("C++ layout: %d bytes, under the size that splits the decode", len(data))
	}
	changeMidDecode(t, dir, "", data)
}

func changeMidDecode(t *testing.T, dir, ext string, data []byte) {
	mutations := map[string]func(path string) error{
		"truncate to nothing": func(p string) error { return os.Truncate(p, 0) },
		"truncate to half":    func(p string) error { return os.Truncate(p, int64(len(data)/2)) },
		// What _dump_snapshot does: open(path, "wb") then write.
		"rewrite in place": func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				return err
			}
			for off := 0; off < len(data); off += 1 << 20 {
				if _, err := f.Write(data[off:min(len(data), off+1<<20)]); err != nil {
					f.Close()
					return err
				}
			}
			return f.Close()
		},
	}
	for name, mutate := range mutations {
		for _, delay := range []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond} {
			path := filepath.Join(dir, "s.pickle"+ext)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			type result struct {
				s   *Snapshot
				err error
			}
			done := make(chan result, 1)
			go func() {
				s, err := Open(context.Background(), path)
				done <- result{s, err}
			}()
			time.Sleep(delay)
			if err := mutate(path); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-done:
				if r.err == nil && len(r.s.Trace(0)) == 0 {
					t.Errorf("s.pickle%s, %s after %v: no error and no trace", ext, name, delay)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("s.pickle%s, %s after %v: the decode never ended", ext, name, delay)
			}
		}
	}
}
