package trace

import (
	"bytes"
	"io"
	"os"
	"regexp"
)

// sniffLimit is how much of a file Sniff looks at. Logs can print their
// first memory line after a long start-up, so text gets a generous window.
const sniffLimit = 4 << 20

var (
	reMegatronMem  = regexp.MustCompile(`\(after \d+ iterations\) memory \(MB\)`)
	reTheoretical  = regexp.MustCompile(`Theoretical memory footprints(?:\s*\([^)]*\))?:`)
	reTorchtitanMe = regexp.MustCompile(`step:\s*\d+.*memory:\s*[\d.]+\s*GiB`)
	reANSI         = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	// A Megatron trace: an object keyed by iteration numbers whose values
	// hold a "samples" array.
	reMegatronHead = regexp.MustCompile(`^\s*\{\s*"-?\d+"\s*:\s*\{`)
	reSamplesArray = regexp.MustCompile(`"samples"\s*:\s*\[`)
)

// Sniff detects the kind of a trace from its first bytes; "" when it is
// none of them.
func Sniff(head []byte) Kind {
	if len(head) > sniffLimit {
		head = head[:sniffLimit]
	}
	t := bytes.TrimLeft(head, " \t\r\n\xef\xbb\xbf")
	if len(t) == 0 {
		return ""
	}
	switch t[0] {
	case '{':
		if bytes.Contains(head, []byte(`"device_mem_stats"`)) ||
			(bytes.Contains(head, []byte(`"snapshots"`)) && bytes.Contains(head, []byte(`"memory_stats"`))) {
			return KindTorchtitanJSON
		}
		if (reMegatronHead.Match(t) && reSamplesArray.Match(head)) || bytes.Equal(bytes.TrimSpace(t), []byte("{}")) {
			return KindMegatron
		}
	case '[':
		if bytes.Contains(head, []byte(`"device_mem_stats"`)) {
			return KindTorchtitanJSON
		}
	}
	// Logs, which may well start with '[' (timestamps, rank prefixes).
	if bytes.IndexByte(head[:min(len(head), 4096)], 0) >= 0 {
		return "" // binary
	}
	if reMegatronMem.Match(head) || reTheoretical.Match(head) {
		return KindMegatronLog
	}
	if reTorchtitanMe.Match(reANSI.ReplaceAll(head, nil)) {
		return KindTorchtitanLog
	}
	return ""
}

// sniffChunk is how much of a log SniffFile looks at a time (the previous
// chunk's tail included) while looking for its first memory line; Sniff
// looks at no more.
const sniffChunk = sniffLimit

// SniffFile sniffs a file. JSON is judged by its head; a text file is read
// chunk by chunk until a memory line turns up, so a log whose first one
// comes after a long preamble (NCCL_DEBUG output, a stack of warnings) is
// still found.
func SniffFile(path string) (Kind, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", err
	}
	k := Sniff(buf[:n])
	if k != "" || n < len(buf) || isBinaryOrJSON(buf[:n]) {
		return k, nil
	}
	// A log whose memory lines come late: read on, keeping the tail of the
	// previous chunk so a line cut in two is seen whole.
	const overlap = 64 << 10
	chunk := make([]byte, sniffChunk)
	carry := copy(chunk, buf[n-min(n, overlap):n])
	for {
		m, err := io.ReadFull(f, chunk[carry:])
		if m == 0 {
			return "", nil
		}
		if k := Sniff(chunk[:carry+m]); k == KindMegatronLog || k == KindTorchtitanLog {
			return k, nil
		}
		if err != nil {
			return "", nil
		}
		end := carry + m
		carry = copy(chunk, chunk[end-overlap:end])
	}
}

// isBinaryOrJSON says the head is not a log: a NUL byte, or JSON.
func isBinaryOrJSON(head []byte) bool {
	if bytes.IndexByte(head[:min(len(head), 4096)], 0) >= 0 {
		return true
	}
	t := bytes.TrimLeft(head, " \t\r\n\xef\xbb\xbf")
	return len(t) > 0 && t[0] == '{'
}

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
