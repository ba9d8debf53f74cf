//go:build race

package fleet

// raceEnabled: the race detector slows HTTP work about tenfold, so timing
// bounds are checked without it (CI runs both).
const raceEnabled = true
