package snapshot

import (
	"archive/zip"
	"context"
	"os"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the snapshot reader (every form:
// pickle, gzip, JSON, HTML, torch.save's zip) and the analysis. Nothing may panic; errors are
// fine. Seeds: small real and synthetic snapshots, plus the corpus in
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, p := range []string{
		"../testdata/snapshots/jogregoire_How-Diffusion-Models-Work__my_snapshot.pickle",
		"../testdata/snapshots/synthetic/legacy_list.pickle",
		"../testdata/snapshots/synthetic/legacy_history.pickle",
		"../testdata/snapshots/synthetic/unknown_and_oom.pickle",
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if p == "../testdata/snapshots/synthetic/legacy_list.pickle" {
			// torch.save's archive of it, stored and deflated.
			f.Add(torchSaveArchive(f, b, zip.Store, "snapshot/data.pkl"))
			f.Add(torchSaveArchive(f, b, zip.Deflate, "snapshot/data.pkl"))
		}
	}
	f.Add([]byte(`{"segments": [{"address": 1, "total_size": 2, "blocks": [{"address": 1, "size": 2, "state": "inactive"}]}]}`))
	f.Add([]byte(`<html>const local_files = [{"name": "snapshot.pickle", "base64": "gASVAAAAAAAAAAB9lC4="}]</html>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(context.Background(), data)
		if err != nil {
			return
		}
		a := Analyze(s, nil)
		for _, d := range a.Devices {
			for _, al := range d.Allocations {
				_ = al.Location()
			}
			_ = StackTree(d.Allocations)
		}
	})
}
