package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"memscope/internal/units"
	"memscope/snapshot"
)

// byteSize is a flag holding a size in bytes, written as a number with an
// optional binary unit: 512MiB, 4GiB, 2G (G, M and K mean GiB, MiB, KiB
// here, as in PyTorch's allocator settings).
type byteSize int64

func (b *byteSize) String() string {
	if *b <= 0 {
		return "default"
	}
	return units.Bytes(int64(*b))
}

func (b *byteSize) Set(s string) error {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10},
		{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 || f*float64(mult) > 1<<62 {
		return fmt.Errorf("%q is not a size (say 512MiB or 4GiB)", s)
	}
	*b = byteSize(f * float64(mult))
	return nil
}

// byteSizeVar adds a byteSize flag with a default.
func byteSizeVar(fs *flag.FlagSet, name string, def int64, usage string) *byteSize {
	b := byteSize(def)
	fs.Var(&b, name, usage)
	return &b
}

// maxInflateFlag adds --max-inflate, the ceiling on what a gzip input may
// expand to (snapshot.InflateMax).
func maxInflateFlag(fs *flag.FlagSet) *byteSize {
	b := new(byteSize)
	fs.Var(b, "max-inflate", fmt.Sprintf("most a .gz snapshot may expand to (default %s or the memory available, whichever is less)",
		units.Bytes(snapshot.DefaultInflateMax)))
	return b
}
