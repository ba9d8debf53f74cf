package model

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestWatchListNews: a listing reports files new or changed since the last
// one, and files gone from its directory, whether a listing or a settled
// event stamped them (a rotated snapshot whose Remove event was lost);
// stamps of other directories, a subfolder's included, are not its news.
func TestWatchListNews(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	other := t.TempDir()
	for _, d := range []string{sub} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, body string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), filepath.Join(dir, "c.json")
	inSub, inOther := filepath.Join(sub, "x.json"), filepath.Join(other, "y.json")
	write(a, "1")
	write(b, "2")
	write(inSub, "3")
	write(inOther, "4")
	w := &Watcher{stamps: map[string]stamp{}, stampsIn: map[string]map[string]bool{}}
	list := func(d string) []string {
		var news []string
		w.list(d, func(p string) { news = append(news, p) })
		slices.Sort(news)
		return news
	}
	for _, d := range []string{sub, other} {
		list(d)
	}
	if got, want := list(dir), []string{a, b, sub}; !slices.Equal(got, want) {
		t.Fatalf("first listing: %v, want %v", got, want)
	}
	if got := list(dir); len(got) != 0 {
		t.Fatalf("nothing changed, yet %v", got)
	}
	write(b, "22") // a new size
	if got, want := list(dir), []string{b}; !slices.Equal(got, want) {
		t.Fatalf("after a write: %v, want %v", got, want)
	}
	// c appears and is settled from its event before any listing, then
	// goes with its Remove event lost; a goes too.
	write(c, "5")
	info, err := os.Stat(c)
	if err != nil {
		t.Fatal(err)
	}
	w.setStamp(c, stamp{info.Size(), info.ModTime()})
	for _, p := range []string{a, c, inSub, inOther} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := list(dir), []string{a, c}; !slices.Equal(got, want) {
		t.Fatalf("after removals: %v, want %v (not the other folders' files)", got, want)
	}
	if _, ok := w.stamps[a]; ok || w.stampsIn[dir][a] || w.stampsIn[dir][c] {
		t.Fatalf("stamps of removed files remain: %v %v", w.stamps, w.stampsIn[dir])
	}
	if got, want := list(sub), []string{inSub}; !slices.Equal(got, want) {
		t.Fatalf("the subfolder: %v, want %v", got, want)
	}
	if len(w.stampsIn[sub]) != 0 {
		t.Fatalf("an emptied folder keeps stamps: %v", w.stampsIn[sub])
	}
}

// TestRescanAfter: the backstop rescans every rescanEvery until a rescan
// takes more than rescanEvery/rescanShare, then waits rescanShare times
// as long as it took.
func TestRescanAfter(t *testing.T) {
	edge := rescanEvery / rescanShare
	for _, c := range []struct{ took, want time.Duration }{
		{0, rescanEvery},
		{time.Millisecond, rescanEvery},
		{edge, rescanEvery},
		{edge + time.Millisecond, (edge + time.Millisecond) * rescanShare},
		{25 * time.Millisecond, 25 * time.Second},
	} {
		if got := rescanAfter(c.took); got != c.want {
			t.Errorf("a rescan of %v: next after %v, want %v", c.took, got, c.want)
		}
	}
}
