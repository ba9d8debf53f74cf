package main

import (
	"context"

	"memscope/model"
)

// watchSources starts watching the workspace's files for changes (see
// model.Watch) and returns a function that stops it.
func watchSources(ctx context.Context, ws *model.Workspace) func() {
	ctx, cancel := context.WithCancel(ctx)
	w, err := model.Watch(ctx, ws)
	if err != nil {
		cancel()
		return func() {}
	}
	return func() {
		cancel()
		w.Wait()
	}
}
