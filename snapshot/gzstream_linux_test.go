package snapshot

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// gzFile writes data gzip-compressed to a file of dir and returns its path.
func gzFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name+".gz")
	if err := os.WriteFile(p, gz(t, data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenGzipStreamAgrees: a .gz snapshot decoded as it inflates is the
// snapshot its plain file gives, in every form a .gz may hold: framed
// pickles decoded frame by frame (real files, a generated trace of 23 MB
// that crosses several of the inflater's windows), and protocol 2, JSON
// and HTML, read once inflated.
func TestOpenGzipStreamAgrees(t *testing.T) {
	dir := t.TempDir()
	plain := []string{"../testdata/snapshots/synthetic/base.pickle", "../testdata/snapshots/synthetic/proto2.pickle",
		"../testdata/snapshots/synthetic/proto5.pickle", "../testdata/snapshots/synthetic/base.json",
		"../testdata/snapshots/synthetic/base.html", "../testdata/snapshots/h200/cpp.pickle"}
	if _, err := exec.LookPath("python3"); err == nil && !testing.Short() {
		p := filepath.Join(dir, "pool.pickle")
		args := []string{"../scripts/gen_snapshot.py", "--entries", "150000", "--frames", "shared", "--frame-pool", "500", "--stacks", "20000", "--depth", "20", p}
		if out, err := exec.Command("python3", args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		plain = append(plain, p)
	}
	for _, p := range plain {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Open(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Open(context.Background(), gzFile(t, dir, filepath.Base(p), raw))
		if err != nil {
			t.Fatalf("%s.gz: %v", p, err)
		}
		if got.Format != want.Format+"+gzip" {
			t.Errorf("%s.gz: format %q, want %q+gzip", p, got.Format, want.Format)
		}
		got.Format = want.Format
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s.gz: not the plain file's snapshot", p)
		}
	}
}

// TestOpenGzipStreamRefuses: a truncated or corrupt member, one that
// expands past the ceiling (on both sides of it), and a cancelled load are
// errors naming the file; none leaves the inflater running.
func TestOpenGzipStreamRefuses(t *testing.T) {
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	raw, err := os.ReadFile("../testdata/snapshots/h200/cpp.pickle")
	if err != nil {
		t.Fatal(err)
	}
	whole := gz(t, raw)
	ctx := context.Background()
	for name, c := range map[string]struct {
		data []byte
		ctx  context.Context
		want string
	}{
		"truncated":         {whole[:len(whole)/2], ctx, "truncated"},
		"corrupt":           {append(bytes.Clone(whole[:20]), bytes.Repeat([]byte{0xff}, 4000)...), ctx, "gzip"},
		"past the ceiling":  {whole, WithInflateMax(ctx, int64(len(raw)-1)), "--max-inflate"},
		"a bomb":            {gz(t, append([]byte("["), make([]byte, 64<<20)...)), ctx, "decompression bomb"},
		"a bomb of zeros":   {gz(t, make([]byte, 64<<20)), ctx, "unrecognised content (first byte 0x00"},
		"a bomb in a frame": {gz(t, append(bytes.Clone(raw[:11]), make([]byte, 64<<20)...)), ctx, "pickle byte"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".pickle.gz")
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(c.ctx, p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", name, err)
		}
	}
	at := filepath.Join(dir, "at.pickle.gz")
	if err := os.WriteFile(at, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(WithInflateMax(ctx, int64(len(raw))), at); err != nil {
		t.Errorf("at the ceiling: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Open(cctx, at); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines, %d before: an inflater is still running", n, before)
	}
}

// TestInflaterReusesPages: the inflater's bytes arrive intact through
// windows whose pages are moved ahead (segments given their pages by
// mremap), and it keeps within inflateAhead of what the reader has read.
func TestInflaterReusesPages(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 48<<20)
	for i := 0; i < len(data); i += 64 {
		v := byte(rnd.IntN(4)) // compressible, but not runs the inflater could skip
		for k := i; k < i+64 && k < len(data); k++ {
			data[k] = v + byte(k)
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz(t, data)))
	if err != nil {
		t.Fatal(err)
	}
	limit := int64(len(data)) + 1<<20
	buf, unmap, err := reserve(limit + 1)
	if err != nil {
		t.Skipf("this machine will not reserve %d bytes of address space for the inflater (openGzipStream then inflates whole): %v", limit+1, err)
	}
	defer unmap()
	z := newInflater(context.Background(), buf)
	go z.run(zr, "too big")
	defer z.stop()
	read, ahead := 0, 0
	for read < len(data) {
		n, err := z.wait(min(read+100_000, len(data)))
		if err != nil {
			t.Fatal(err)
		}
		ahead = max(ahead, n-read)
		if !bytes.Equal(buf[read:n], data[read:n]) {
			t.Fatalf("bytes %d-%d differ from what was compressed", read, n)
		}
		read = n
		z.drop(0, read)
	}
	if n, _ := z.wait(len(buf)); n != len(data) {
		t.Errorf("%d bytes, want %d", n, len(data))
	}
	z.mu.Lock()
	freed, moved := z.freed, !z.noRecycle
	z.mu.Unlock()
	if !moved || freed < len(data)-inflateAhead-2*segment-dropLag-z.base {
		t.Errorf("pages given back up to %d of %d (moves work: %v)", freed, len(data), moved)
	}
	if ahead > inflateAhead+segment+256<<10+100_000 {
		t.Errorf("the inflater ran %d bytes ahead of the reader", ahead)
	}
}

// TestInflaterWindow: the inflater stops inflateAhead bytes past what the
// reader has given back, and goes past that when the reader waits for more
// (a frame longer than the window, or content read whole).
func TestInflaterWindow(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (inflateAhead+8<<20)/16)
	run := func() (*inflater, func()) {
		zr, err := gzip.NewReader(bytes.NewReader(gz(t, data)))
		if err != nil {
			t.Fatal(err)
		}
		buf, unmap, err := reserve(int64(len(data)) + 1<<20)
		if err != nil {
			t.Skipf("this machine will not reserve %d bytes of address space for the inflater (openGzipStream then inflates whole): %v", len(data)+1<<20, err)
		}
		z := newInflater(context.Background(), buf)
		go z.run(zr, "too big")
		return z, func() { z.stop(); unmap() }
	}
	z, stop := run()
	if _, err := z.wait(1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for z.avail.Load() < inflateAhead && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // what it would inflate past the window, were it not waiting
	if a := z.avail.Load(); a < inflateAhead || a > inflateAhead+segment {
		t.Errorf("nothing given back: %d bytes inflated, want %d to %d", a, inflateAhead, inflateAhead+segment)
	}
	stop()

	z, stop = run()
	defer stop()
	if n, err := z.wait(len(data)); err != nil || n != len(data) || !bytes.Equal(z.buf[:n], data) {
		t.Errorf("waiting for all of it: %d bytes, %v", n, err)
	}
}
