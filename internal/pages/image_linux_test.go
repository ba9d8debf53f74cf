package pages

import (
	"bufio"
	"debug/elf"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestReleasable: only loaded segments that are neither writable nor
// zero-filled in part give pages back, whole pages inside them, and none
// from the page where a GNU_RELRO range starts on.
func TestReleasable(t *testing.T) {
	const page = 0x1000
	load := func(flags elf.ProgFlag, vaddr, filesz, memsz uint64) *elf.Prog {
		return &elf.Prog{ProgHeader: elf.ProgHeader{Type: elf.PT_LOAD, Flags: flags, Vaddr: vaddr, Filesz: filesz, Memsz: memsz}}
	}
	relro := func(vaddr, memsz uint64) *elf.Prog {
		return &elf.Prog{ProgHeader: elf.ProgHeader{Type: elf.PT_GNU_RELRO, Flags: elf.PF_R, Vaddr: vaddr, Memsz: memsz}}
	}
	for _, c := range []struct {
		name  string
		progs []*elf.Prog
		want  [][2]uint64
	}{
		{"code and constants", []*elf.Prog{load(elf.PF_R|elf.PF_X, 0x411000, 0x5000, 0x5000), load(elf.PF_R, 0x416000, 0x3000, 0x3000)},
			[][2]uint64{{0x411000, 0x416000}, {0x416000, 0x419000}}},
		{"a writable segment", []*elf.Prog{load(elf.PF_R|elf.PF_W, 0x411000, 0x5000, 0x5000)}, nil},
		{"a zero-filled tail", []*elf.Prog{load(elf.PF_R, 0x411000, 0x5000, 0x6000)}, nil},
		// Partial pages at either end stay.
		{"unaligned", []*elf.Prog{load(elf.PF_R, 0x411010, 0x3000, 0x3000)}, [][2]uint64{{0x412000, 0x414000}}},
		{"one page, unaligned", []*elf.Prog{load(elf.PF_R, 0x411010, 0xff0, 0xff0)}, nil},
		// A relocated range in a read-only segment: its page and the
		// rest stay, the pages before it go.
		{"RELRO inside", []*elf.Prog{load(elf.PF_R, 0x411000, 0x5000, 0x5000), relro(0x413010, 0x10)},
			[][2]uint64{{0x411000, 0x413000}}},
		{"RELRO at the start", []*elf.Prog{load(elf.PF_R, 0x411000, 0x5000, 0x5000), relro(0x411000, 0x10)}, nil},
		{"RELRO elsewhere", []*elf.Prog{load(elf.PF_R, 0x411000, 0x5000, 0x5000), relro(0x420000, 0x10)},
			[][2]uint64{{0x411000, 0x416000}}},
	} {
		if got := releasable(c.progs, page); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %x, want %x", c.name, got, c.want)
		}
	}
}

// TestReleaseImage: the test binary's code pages that are mapped go, and
// it runs on (every function it calls after comes back from the file).
func TestReleaseImage(t *testing.T) {
	if traced() {
		t.Skip("under a debugger ReleaseImage keeps the pages")
	}
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	typ := f.Type
	f.Close()
	if typ != elf.ET_EXEC {
		t.Skip("a position-independent test binary")
	}
	before := codeRSS(t)
	ReleaseImage()
	after := codeRSS(t)
	if after >= before {
		t.Errorf("the code's resident pages went from %d to %d KiB", before, after)
	}
	if got := strings.Repeat("ab", 3); got != "ababab" {
		t.Errorf("after ReleaseImage: %q", got)
	}
}

// codeRSS is the resident KiB of the process's executable mappings of its
// own file.
func codeRSS(t *testing.T) int {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	total, in := 0, false
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		switch {
		case len(fields) >= 6 && strings.Contains(fields[0], "-"):
			in = fields[5] == exe && strings.Contains(fields[1], "x")
		case in && len(fields) >= 2 && fields[0] == "Rss:":
			n, _ := strconv.Atoi(fields[1])
			total += n
		}
	}
	return total
}
