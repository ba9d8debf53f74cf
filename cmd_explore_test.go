package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"memscope/model"
)

// TestOpenInBackground: the explorer opens the files it is given before it
// draws (a missing one fails at once), and the folders while it draws:
// every source of a folder is there once the returned channel closes, as
// Workspace.Open would have found it.
func TestOpenInBackground(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/snapshots/h100/cnn_sgd.pickle.gz")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.pickle.gz", "sub/b.pickle.gz"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, missing := filepath.Join(dir, "a.pickle.gz"), filepath.Join(dir, "none.pickle")
	paths := func(ws *model.Workspace) (ok, failed []string) {
		for _, s := range ws.Sources() {
			if s.State == model.Failed {
				failed = append(failed, s.Path)
			} else {
				ok = append(ok, s.Path)
			}
		}
		slices.Sort(ok)
		return ok, failed
	}
	ctx := context.Background()
	ws := model.New(ctx, nil)
	done := openInBackground(ws, []string{file, missing, filepath.Join(dir, "sub")}, false)
	// Before the folder is walked: the file and the failure are there.
	ok, failed := paths(ws)
	if !slices.Contains(ok, file) || !slices.Equal(failed, []string{missing}) {
		t.Errorf("on return: sources %v, failed %v", ok, failed)
	}
	<-done
	ws.Wait()
	ref := model.New(ctx, nil)
	ref.Open(file, missing, filepath.Join(dir, "sub"))
	ref.Wait()
	gotOK, gotFailed := paths(ws)
	wantOK, wantFailed := paths(ref)
	if len(gotOK) != 2 || !slices.Equal(gotOK, wantOK) || !slices.Equal(gotFailed, wantFailed) {
		t.Errorf("sources %v, failed %v; Open gives %v, %v", gotOK, gotFailed, wantOK, wantFailed)
	}

	// The current folder opened without a PATH: nothing found is no error.
	empty := model.New(ctx, nil)
	<-openInBackground(empty, []string{t.TempDir()}, true)
	if n := len(empty.Sources()); n != 0 {
		t.Errorf("an empty folder opened quietly: %d sources", n)
	}
}

// TestWatchWaitsForDiscovery: the watcher starts only once the folders are
// open, and stopping it before then returns at once.
func TestWatchWaitsForDiscovery(t *testing.T) {
	ws := model.New(context.Background(), nil)
	never := make(chan struct{})
	stop := watchSources(context.Background(), ws, never)
	stop() // would block if it waited for a watcher that never starts

	opened := make(chan struct{})
	close(opened)
	stop = watchSources(context.Background(), ws, opened)
	stop()
}
