//go:build !linux

package pages

// Huge does nothing here (see the Linux version).
func Huge[T any](s []T) {}
