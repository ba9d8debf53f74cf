package pages

import (
	"bytes"
	"debug/elf"
	"os"
	"syscall"
)

// ReleaseImage gives back the program's own read-only pages (code,
// constants, function tables) that are mapped now. Those a command uses
// again come back from the page cache on first use, without a read.
//
// Called at the start of main, it drops what only the packages'
// initialization touched: Go runs every imported package's, the TUI's,
// the plotting's and the cluster client's for a `report` too, and the
// kernel maps 64 KiB around each page a fault touches. Of the 40 MB
// binary, 17 MiB stayed resident through a report of a 37 MB snapshot;
// with this, 12 MiB (most of the rest is the fonts that the plotting
// package parses at its initialization, in a writable segment, which
// keeps its pages).
//
// Nothing is given back in a position-independent executable (its
// segments are not at the file's addresses), in pages that relocations
// wrote (GNU_RELRO), or under a debugger, whose breakpoints are written
// into the code's pages and would be lost with them.
func ReleaseImage() {
	if traced() {
		return
	}
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		return
	}
	for _, r := range releasable(f.Progs, uint64(syscall.Getpagesize())) {
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(r[0]), uintptr(r[1]-r[0]), syscall.MADV_DONTNEED)
	}
}

// releasable is the page-aligned address ranges of an executable's
// segments (progs) whose pages ReleaseImage may give back: loaded, not
// writable, all of them from the file (a segment's zero-filled tail is
// memory of its own), and short of any page of a GNU_RELRO range.
func releasable(progs []*elf.Prog, page uint64) [][2]uint64 {
	var relro [][2]uint64
	for _, p := range progs {
		if p.Type == elf.PT_GNU_RELRO {
			relro = append(relro, [2]uint64{p.Vaddr &^ (page - 1), p.Vaddr + p.Memsz})
		}
	}
	var out [][2]uint64
	for _, p := range progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_W != 0 || p.Filesz != p.Memsz {
			continue
		}
		lo := (p.Vaddr + page - 1) &^ (page - 1)
		hi := (p.Vaddr + p.Filesz) &^ (page - 1)
		for _, r := range relro {
			if r[0] < hi && r[1] > lo {
				hi = min(hi, r[0])
			}
		}
		if hi > lo {
			out = append(out, [2]uint64{lo, hi})
		}
	}
	return out
}

// traced reports whether a debugger (or any tracer) is attached.
func traced() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true // unknown: keep the pages
	}
	i := bytes.Index(b, []byte("\nTracerPid:"))
	if i < 0 {
		return true
	}
	line := b[i+len("\nTracerPid:"):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	return string(bytes.TrimSpace(line)) != "0"
}
