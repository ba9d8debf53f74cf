package snapshot

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"memscope/internal/textsafe"
	"memscope/internal/units"
)

// DiffRow is one line of a diff: bytes (or counts) in A, in B. OnlyA and
// OnlyB mark a total that one side does not have (an estimate has no
// reserved memory): not zero, nothing to compare.
type DiffRow struct {
	Name         string
	A, B         int64
	OnlyA, OnlyB bool
}

// Both reports whether both sides have the row.
func (r DiffRow) Both() bool { return !r.OnlyA && !r.OnlyB }

// Delta is B - A.
func (r DiffRow) Delta() int64 { return r.B - r.A }

// Diff compares two snapshots (allocator snapshots, estimates, or one of
// each): totals, categories and call sites, largest changes first.
type Diff struct {
	A, B       string
	Totals     []DiffRow
	Categories []DiffRow
	Sites      []DiffRow
	// PeakCategories and PeakSites compare what was live at each side's
	// peak: two runs often end alike and differ on the way.
	PeakCategories []DiffRow
	PeakSites      []DiffRow
	// Roles and PeakRoles compare the roles (what the memory is); empty
	// unless both sides are allocator snapshots (estimates carry none).
	Roles, PeakRoles []DiffRow
}

// Side is what a diff needs of one input.
type Side struct {
	Name   string
	Totals []DiffRow // Name and A used
	Allocs []Allocation
	// PeakAllocs are the allocations live at the peak (for estimates, which
	// describe the peak, the same as Allocs).
	PeakAllocs []Allocation
	// HasRoles is set for allocator snapshots, whose allocations have roles.
	HasRoles bool
}

// SideOf summarises an analysed allocator snapshot (all devices).
func SideOf(name string, a *Analysis) Side {
	s := Side{Name: name, HasRoles: true}
	var t [8]int64
	for i := range a.Devices {
		d := &a.Devices[i]
		for k, v := range []int64{d.ReservedBytes, d.AllocatedBytes, d.ActiveBytes, d.RequestedBytes, d.InactiveBytes,
			d.RoundingWaste, int64(d.Segments), int64(d.Blocks)} {
			t[k] += v
		}
		s.Allocs = append(s.Allocs, d.Allocations...)
	}
	for k, n := range []string{"reserved_bytes", "allocated_bytes", "active_bytes", "requested_bytes", "inactive_bytes",
		"rounding_waste_bytes", "segments", "blocks"} {
		s.Totals = append(s.Totals, DiffRow{Name: n, A: t[k]})
	}
	// Each device's peak (the snapshot itself on a device without trace).
	var peak int64
	for i := range a.Devices {
		d := &a.Devices[i]
		peak += d.Peak.Active
		s.PeakAllocs = append(s.PeakAllocs, a.PeakLive(d)...)
	}
	if len(a.Devices) > 0 {
		s.Totals = append(s.Totals, DiffRow{Name: "peak_active_bytes", A: peak})
	}
	return s
}

// Compare diffs two sides. Totals present on one side only read as 0 on
// the other.
func Compare(a, b Side) *Diff {
	d := &Diff{A: a.Name, B: b.Name}
	d.Totals = mergeRows(a.Totals, b.Totals, false)
	// A total only one kind of input has is not zero on the other.
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, r := range a.Totals {
		inA[r.Name] = true
	}
	for _, r := range b.Totals {
		inB[r.Name] = true
	}
	for i := range d.Totals {
		r := &d.Totals[i]
		r.OnlyA, r.OnlyB = !inB[r.Name], !inA[r.Name]
	}
	category := func(x *Allocation) string { return x.Category }
	d.Categories = mergeRows(groupBy(a.Allocs, category), groupBy(b.Allocs, category), true)
	locs := map[StackKey]string{} // one Location per distinct stack
	site := func(x *Allocation) string {
		if x.Frames.Len() == 0 {
			return NoFrames
		}
		l, ok := locs[x.Frames.Key()]
		if !ok {
			if l = x.Location(); l == "" {
				l = NoFrames
			}
			locs[x.Frames.Key()] = l
		}
		return l
	}
	d.Sites = mergeRows(groupBy(a.Allocs, site), groupBy(b.Allocs, site), true)
	d.PeakCategories = mergeRows(groupBy(a.PeakAllocs, category), groupBy(b.PeakAllocs, category), true)
	d.PeakSites = mergeRows(groupBy(a.PeakAllocs, site), groupBy(b.PeakAllocs, site), true)
	if a.HasRoles && b.HasRoles {
		role := func(x *Allocation) string { return x.Role.String() }
		d.Roles = mergeRows(groupBy(a.Allocs, role), groupBy(b.Allocs, role), true)
		d.PeakRoles = mergeRows(groupBy(a.PeakAllocs, role), groupBy(b.PeakAllocs, role), true)
	}
	return d
}

func groupBy(allocs []Allocation, key func(*Allocation) string) []DiffRow {
	idx := map[string]int{}
	var out []DiffRow
	for i := range allocs {
		k := key(&allocs[i])
		j, ok := idx[k]
		if !ok {
			j = len(out)
			idx[k] = j
			out = append(out, DiffRow{Name: k})
		}
		out[j].A += allocs[i].Size
	}
	return out
}

// mergeRows joins rows by name (A from a, B from b); sorted by |delta| when
// byDelta, else in a's order.
func mergeRows(a, b []DiffRow, byDelta bool) []DiffRow {
	idx := map[string]int{}
	var out []DiffRow
	for _, r := range a {
		idx[r.Name] = len(out)
		out = append(out, DiffRow{Name: r.Name, A: r.A})
	}
	for _, r := range b {
		j, ok := idx[r.Name]
		if !ok {
			j = len(out)
			idx[r.Name] = j
			out = append(out, DiffRow{Name: r.Name})
		}
		out[j].B += r.A
	}
	if byDelta {
		// Largest change first; ties (often no change) by size, then name.
		slices.SortFunc(out, func(x, y DiffRow) int {
			if c := cmp.Compare(absInt(y.Delta()), absInt(x.Delta())); c != 0 {
				return c
			}
			if c := cmp.Compare(max(y.A, y.B), max(x.A, x.B)); c != 0 {
				return c
			}
			return cmp.Compare(x.Name, y.Name)
		})
	}
	return out
}

// WriteJSON writes the diff as documented in the README.
func (d *Diff) WriteJSON(w io.Writer) error {
	// A total one side lacks is null there, and so is its delta.
	type tot struct {
		A     *int64 `json:"a"`
		B     *int64 `json:"b"`
		Delta *int64 `json:"delta"`
	}
	ptr := func(v int64, ok bool) *int64 {
		if !ok {
			return nil
		}
		return &v
	}
	type cat struct {
		Name  string `json:"name"`
		A     int64  `json:"a_bytes"`
		B     int64  `json:"b_bytes"`
		Delta int64  `json:"delta_bytes"`
	}
	type site struct {
		Site     string `json:"site"`
		Location string `json:"location"` // the same as site, for older scripts
		A        int64  `json:"a_bytes"`
		B        int64  `json:"b_bytes"`
		Delta    int64  `json:"delta_bytes"`
	}
	out := struct {
		A          string         `json:"a"`
		B          string         `json:"b"`
		Totals     map[string]tot `json:"totals"`
		Categories []cat          `json:"categories"`
		Sites      []site         `json:"sites"`
		PeakCats   []cat          `json:"peak_categories"`
		PeakSites  []site         `json:"peak_sites"`
		Roles      []cat          `json:"roles"`
		PeakRoles  []cat          `json:"peak_roles"`
	}{A: d.A, B: d.B, Totals: map[string]tot{}, Categories: []cat{}, Sites: []site{}, PeakCats: []cat{}, PeakSites: []site{},
		Roles: []cat{}, PeakRoles: []cat{}}
	for _, r := range d.Totals {
		out.Totals[r.Name] = tot{ptr(r.A, !r.OnlyB), ptr(r.B, !r.OnlyA), ptr(r.Delta(), r.Both())}
	}
	for _, r := range d.Categories {
		out.Categories = append(out.Categories, cat{r.Name, r.A, r.B, r.Delta()})
	}
	for _, r := range d.Sites {
		out.Sites = append(out.Sites, site{r.Name, r.Name, r.A, r.B, r.Delta()})
	}
	for _, r := range d.Roles {
		out.Roles = append(out.Roles, cat{r.Name, r.A, r.B, r.Delta()})
	}
	for _, r := range d.PeakRoles {
		out.PeakRoles = append(out.PeakRoles, cat{r.Name, r.A, r.B, r.Delta()})
	}
	for _, r := range d.PeakCategories {
		out.PeakCats = append(out.PeakCats, cat{r.Name, r.A, r.B, r.Delta()})
	}
	for _, r := range d.PeakSites {
		out.PeakSites = append(out.PeakSites, site{r.Name, r.Name, r.A, r.B, r.Delta()})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteText writes the diff as tables; top limits the call sites shown.
func (d *Diff) WriteText(w io.Writer, top int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "A: %s\nB: %s\n\n", d.A, d.B)
	fmt.Fprintf(&b, "%-22s %14s %14s %14s\n", "TOTAL", "A", "B", "B − A")
	for _, r := range d.Totals {
		cell := func(v int64, ok bool) string {
			switch {
			case !ok:
				return "n/a"
			case strings.HasSuffix(r.Name, "_bytes"):
				return units.Bytes(v)
			}
			return fmt.Sprint(v)
		}
		delta := "n/a"
		if r.Both() {
			delta = fmt.Sprintf("%+d", r.Delta())
			if strings.HasSuffix(r.Name, "_bytes") {
				delta = units.Signed(r.Delta())
			}
		}
		fmt.Fprintf(&b, "%-22s %14s %14s %14s\n", strings.TrimSuffix(r.Name, "_bytes"), cell(r.A, !r.OnlyB), cell(r.B, !r.OnlyA), delta)
	}
	writeRows := func(title string, roles, cats, sites []DiffRow) {
		if len(roles) > 0 {
			fmt.Fprintf(&b, "\n%-22s %14s %14s %14s\n", "ROLE"+title, "A", "B", "B − A")
			for _, r := range roles {
				fmt.Fprintf(&b, "%-22s %14s %14s %14s\n", r.Name, units.Bytes(r.A), units.Bytes(r.B), units.Signed(r.Delta()))
			}
		}
		fmt.Fprintf(&b, "\n%-22s %14s %14s %14s\n", "CATEGORY"+title, "A", "B", "B − A")
		for _, r := range cats {
			fmt.Fprintf(&b, "%-22s %14s %14s %14s\n", r.Name, units.Bytes(r.A), units.Bytes(r.B), units.Signed(r.Delta()))
		}
		fmt.Fprintf(&b, "\n%14s %14s %14s  %s\n", "A", "B", "B − A", "CALL SITE"+title+" (largest changes first)")
		for i, r := range sites {
			if i == top {
				fmt.Fprintf(&b, "… %d more call sites\n", len(sites)-top)
				break
			}
			fmt.Fprintf(&b, "%14s %14s %14s  %s\n", units.Bytes(r.A), units.Bytes(r.B), units.Signed(r.Delta()), r.Name)
		}
	}
	writeRows(" AT THE PEAK", d.PeakRoles, d.PeakCategories, d.PeakSites)
	writeRows(" AT THE END", d.Roles, d.Categories, d.Sites)
	_, err := io.WriteString(w, textsafe.Lines(b.String()))
	return err
}

func absInt(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
