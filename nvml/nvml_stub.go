//go:build !cgo || !linux

package nvml

import (
	"context"
	"errors"
)

// Available reports whether this build can use NVML at all.
const Available = false

// NVML is unavailable in builds without cgo.
type NVML struct{}

// Open fails: NVML needs cgo (go-nvml loads libnvidia-ml.so.1 through it).
func Open() (*NVML, error) {
	return nil, errors.New("this memscope was built without cgo (or not for Linux), so it cannot talk to NVML; rebuild with CGO_ENABLED=1, or use the simulated source (--source fake) or --replay DIR")
}

// Name describes the source.
func (n *NVML) Name() string { return "NVML (unavailable)" }

// Simulated is false.
func (n *NVML) Simulated() bool { return false }

// Devices is empty.
func (n *NVML) Devices() []Device { return nil }

// Sample fails.
func (n *NVML) Sample(context.Context) ([]Sample, error) { return nil, errors.New("NVML unavailable") }

// Close does nothing.
func (n *NVML) Close() error { return nil }
