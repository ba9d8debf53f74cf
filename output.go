package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

func pictureExt(format string) (string, bool) {
	switch strings.ToLower(strings.TrimPrefix(format, ".")) {
	case "png":
		return ".png", true
	case "svg":
		return ".svg", true
	}
	return "", false
}

var reUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// folderName makes a file-system-safe name from a path.
func folderName(p string) string {
	base := filepath.Base(filepath.Clean(p))
	base = strings.TrimSuffix(base, filepath.Ext(base))
	if base == "." || base == "" || base == string(filepath.Separator) {
		base = "memscope"
	}
	return strings.Trim(reUnsafe.ReplaceAllString(base, "_"), "_")
}

// newRunFolder makes DIR/YYYYMMDD_HHMMSS_NAME and points DIR/latest at it.
func newRunFolder(root, name string, paths []string) (string, error) {
	if name == "" {
		if len(paths) > 0 {
			name = folderName(paths[0])
		} else {
			name = "memscope"
		}
	}
	name = strings.Trim(reUnsafe.ReplaceAllString(name, "_"), "_")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	// Two runs of the same name in one second get folders of their own
	// (_2, _3, …): one never overwrites the other.
	base := filepath.Join(root, time.Now().Format("20060102_150405")+"_"+name)
	dir := base
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i > 1000 {
			return "", err
		}
		dir = fmt.Sprintf("%s_%d", base, i)
	}
	latest := filepath.Join(root, "latest")
	if fi, err := os.Lstat(latest); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		return dir, fmt.Errorf("%s exists and is not a link; not replacing it", latest)
	}
	os.Remove(latest)
	if err := os.Symlink(filepath.Base(dir), latest); err != nil {
		return dir, fmt.Errorf("latest link: %w", err)
	}
	return dir, nil
}
