//go:build !linux

package pages

// Populate does nothing here (see the Linux version).
func Populate[T any](s []T) bool { return false }
