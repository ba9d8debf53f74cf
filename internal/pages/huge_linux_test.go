package pages

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// thpMode is the system's transparent huge page mode (always, madvise or
// never), or "" where the kernel does not say.
func thpMode() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	s := string(b)
	if i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']'); i >= 0 && j > i {
		return s[i+1 : j]
	}
	return ""
}

// vmstat reads counters from /proc/vmstat.
func vmstat(t *testing.T, names ...string) []int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		t.Skipf("no /proc/vmstat: %v", err)
	}
	out := make([]int64, len(names))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i, n := range names {
			if len(f) == 2 && f[0] == n {
				out[i], _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	return out
}

// anonHuge is the memory in huge pages of the mappings in [lo, hi), from
// /proc/self/smaps.
func anonHuge(t *testing.T, lo, hi uintptr) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	var in bool
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if a, z, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			x, err1 := strconv.ParseUint(a, 16, 64)
			y, err2 := strconv.ParseUint(z, 16, 64)
			in = err1 == nil && err2 == nil && uintptr(x) < hi && uintptr(y) > lo
			continue
		}
		if in && f[0] == "AnonHugePages:" && len(f) >= 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			kb += n
		}
	}
	return kb << 10
}

// hugePages touches every page of a fresh mapping of 10 huge pages, with
// a slice over 9 of them (7 whole) advised by Huge first or not, and
// returns how many huge pages back the mapping, and how many times the
// kernel (any process) found no free huge page meanwhile.
func hugePages(t *testing.T, advise bool) (got, refused int64) {
	t.Helper()
	const size = 10 * HugeSize
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Munmap(b) }()
	base := uintptr(unsafe.Pointer(&b[0]))
	lo := int((HugeSize - base%HugeSize) % HugeSize)
	before := vmstat(t, "thp_fault_fallback")
	if advise {
		Huge(b[lo+100 : lo+9*HugeSize-100])
	}
	for i := 0; i < len(b); i += stride {
		b[i] = 1
	}
	after := vmstat(t, "thp_fault_fallback")
	return anonHuge(t, base, base+size) / HugeSize, after[0] - before[0]
}

// TestHuge: where huge pages are given to those who ask (madvise), memory
// Huge advised gets them and other memory does not, and Huge leaves alone
// the huge pages a slice covers only in part.
func TestHuge(t *testing.T) {
	skipWhereHostReclaims(t)
	switch mode := thpMode(); mode {
	case "madvise":
	case "always":
		t.Skip("transparent huge pages are always on here: Huge cannot be told apart")
	default:
		t.Skipf("transparent huge pages are %q here: Huge does nothing", mode)
	}
	if n, _ := hugePages(t, false); n != 0 {
		t.Errorf("without Huge %d huge pages back the mapping", n)
	}
	n, refused := hugePages(t, true)
	t.Logf("with Huge: %d huge pages (%d refused)", n, refused)
	if n == 0 && refused > 0 {
		t.Skip("the kernel had no free huge page")
	}
	if n == 0 {
		t.Error("with Huge no huge page backs the advised slice")
	}
	if n > 7 {
		t.Errorf("with Huge %d huge pages back the mapping; the slice holds 7 whole ones", n)
	}
}

// TestHugeSmall: a slice without a whole huge page is not advised (and
// does not fail).
func TestHugeSmall(t *testing.T) {
	var none []byte
	Huge(none)
	b := make([]byte, HugeSize-1)
	Huge(b)
	Huge(b[:1])
}

// TestHugeDisabled: with GODEBUG=disablethp=1, which keeps Go's heap off
// huge pages, Huge advises nothing either (run in a child process: the
// setting is read at start).
func TestHugeDisabled(t *testing.T) {
	if os.Getenv("PAGES_TEST_CHILD") == "1" {
		if !thpDisabled || !hugeOff() {
			t.Fatal("GODEBUG=disablethp=1 not seen")
		}
		if thpMode() == "madvise" {
			if n, _ := hugePages(t, true); n != 0 {
				t.Fatalf("with disablethp=1, %d huge pages after Huge", n)
			}
		}
		return
	}
	if thpDisabled {
		t.Fatal("disablethp seen without GODEBUG's disablethp=1")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHugeDisabled$", "-test.v")
	cmd.Env = append(os.Environ(), "PAGES_TEST_CHILD=1", "GODEBUG=madvdontneed=1,disablethp=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestPrefaultHugeMin: Prefault asks for huge pages for an array of
// hugeMin bytes or more, and not for a smaller one (each side of the
// bound), where huge pages are given to those who ask.
func TestPrefaultHugeMin(t *testing.T) {
	skipWhereHostReclaims(t)
	if mode := thpMode(); mode != "madvise" {
		t.Skipf("transparent huge pages are %q here, not madvise: the advice cannot be seen", mode)
	}
	for _, c := range []struct {
		size int
		huge bool
	}{{hugeMin - stride, false}, {hugeMin, true}} {
		b, err := syscall.Mmap(-1, 0, c.size+HugeSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		base := uintptr(unsafe.Pointer(&b[0]))
		lo := int((HugeSize - base%HugeSize) % HugeSize) // a whole huge page or more inside either way
		before := vmstat(t, "thp_fault_fallback")
		Prefault(b[lo : lo+c.size])
		refused := vmstat(t, "thp_fault_fallback")[0] - before[0]
		n := anonHuge(t, base, base+uintptr(len(b))) / HugeSize
		_ = syscall.Munmap(b)
		switch {
		case c.huge && n == 0 && refused > 0:
			t.Skip("the kernel had no free huge page")
		case c.huge && n == 0:
			t.Errorf("%d bytes: no huge page after Prefault", c.size)
		case !c.huge && n != 0:
			t.Errorf("%d bytes (under hugeMin): %d huge pages after Prefault", c.size, n)
		}
	}
}

// skipWhereHostReclaims skips a test of Huge's advice on a machine where
// Huge gives none (its host takes back free pages: reportsFreePages).
func skipWhereHostReclaims(t *testing.T) {
	t.Helper()
	if hostReclaims() {
		t.Skip("this machine's balloon reports free pages to its host: Huge advises nothing here (TestReportsFreePages)")
	}
}

// TestReportsFreePages: a virtio balloon with free page reporting (bit 5
// of its features) in blocks of a huge page or less turns huge pages off;
// without the bit, reporting larger blocks only, another device with bit
// 5, or no virtio device at all, they stay.
func TestReportsFreePages(t *testing.T) {
	bits := func(on ...int) string {
		b := []byte(strings.Repeat("0", 64))
		for _, i := range on {
			b[i] = '1'
		}
		return string(b) + "\n"
	}
	type dev struct{ id, features string }
	cases := []struct {
		name  string
		devs  []dev
		order string // page_reporting_order; "" for no file
		want  bool
	}{
		{"balloon reporting", []dev{{"0x0002", bits(0)}, {"0x0005", bits(1, 2, 5, 7)}}, "", true},
		{"balloon reporting huge pages", []dev{{"0x0005", bits(5)}}, "9\n", true},
		{"balloon reporting smaller blocks", []dev{{"0x0005", bits(5)}}, "5", true},
		{"balloon reporting larger blocks", []dev{{"0x0005", bits(5)}}, "10", false},
		{"balloon without reporting", []dev{{"0x0005", bits(1, 2, 7)}}, "", false},
		{"another device with bit 5", []dev{{"0x0001", bits(5)}}, "", false},
		{"features cut short", []dev{{"0x0005", "0110"}}, "", false},
		{"no virtio", nil, "", false},
	}
	for _, c := range cases {
		root := t.TempDir()
		for i, d := range c.devs {
			dir := filepath.Join(root, "bus/virtio/devices", "virtio"+strconv.Itoa(i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			_ = os.WriteFile(filepath.Join(dir, "device"), []byte(d.id+"\n"), 0o644)
			_ = os.WriteFile(filepath.Join(dir, "features"), []byte(d.features), 0o644)
		}
		if c.order != "" {
			dir := filepath.Join(root, "module/page_reporting/parameters")
			_ = os.MkdirAll(dir, 0o755)
			_ = os.WriteFile(filepath.Join(dir, "page_reporting_order"), []byte(c.order), 0o644)
		}
		if got := reportsFreePages(root); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
