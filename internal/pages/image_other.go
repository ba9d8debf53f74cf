//go:build !linux

package pages

// ReleaseImage does nothing outside Linux.
func ReleaseImage() {}
