// Package par runs work on several goroutines whose panics reach the
// goroutine that waits for them.
package par

import "sync"

// Group is a sync.WaitGroup whose goroutines' panics Wait raises again on
// its caller's goroutine. A panic left on a goroutine of its own ends the
// program past every recover: the loader's, which turns a bad file into
// an error naming it, and the explorer's, which restores the terminal.
// The zero Group is ready to use.
type Group struct {
	wg       sync.WaitGroup
	mu       sync.Mutex
	panicked bool
	value    any
}

// Go runs f on a new goroutine.
func (g *Group) Go(f func()) {
	g.wg.Go(func() {
		defer func() {
			if r := recover(); r != nil {
				g.mu.Lock()
				if !g.panicked {
					g.panicked, g.value = true, r
				}
				g.mu.Unlock()
			}
		}()
		f()
	})
}

// Wait waits for every goroutine Go started, then panics with the value of
// the first one that panicked, if one did.
func (g *Group) Wait() {
	g.wg.Wait()
	if g.panicked {
		panic(g.value)
	}
}

// Each runs f(0), ..., f(n-1): on the caller's goroutine when n is 1, else
// each on a goroutine of its own, and returns when all have, raising the
// first panic again as Wait does.
func Each(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var g Group
	for i := range n {
		g.Go(func() { f(i) })
	}
	g.Wait()
}
