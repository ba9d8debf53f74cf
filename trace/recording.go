package trace

import (
	"io"
	"os"
	"regexp"
)

var reRecordedSource = regexp.MustCompile(`"source"\s*:\s*"(?:nvml|fake)"`)

// IsRecording reports whether dir holds traces written by `memscope record`
// (their iterations end with "source": "nvml" or "fake", so the file's
// tail tells).
func IsRecording(dir string) bool {
	files, err := DirectFiles(dir)
	if err != nil || len(files) == 0 {
		return false
	}
	f, err := os.Open(files[0])
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false
	}
	buf := make([]byte, min(st.Size(), 4096))
	if _, err := f.ReadAt(buf, st.Size()-int64(len(buf))); err != nil && err != io.EOF {
		return false
	}
	return reRecordedSource.Match(buf)
}
