package format

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Sniff says what a file is from its first bytes: snapshot forms first
// (their marks are exact), then traces and logs.
func Sniff(head []byte) Kind {
	if k := sniffSnapshot(head); k != Unknown {
		return k
	}
	return sniffTrace(head)
}

// SniffFile reads the head of a file and sniffs it. JSON and pickles are
// judged by their head; a text file is read chunk by chunk until a memory
// line turns up, so a log whose first one comes after a long preamble
// (NCCL_DEBUG output, a stack of warnings) is still found.
func SniffFile(path string) (Kind, error) {
	return sniffFile(path, true)
}

// HeadSize is how much of a file the head sniff reads, and how much of
// data Sniff needs.
const HeadSize = 64 << 10

// sniffFile sniffs path by its head and, when logs says so and the head is
// text with no memory line, by the rest of it, chunk by chunk.
func sniffFile(path string, logs bool) (Kind, error) {
	f, err := os.Open(path)
	if err != nil {
		return Unknown, err
	}
	defer f.Close()
	buf := make([]byte, HeadSize)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return Unknown, err
	}
	head := buf[:n]
	k := sniffHead(path, head)
	if !logs || k != Unknown || n < len(buf) || isBinaryOrJSON(head) {
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
			return Unknown, nil
		}
		if k := sniffTrace(chunk[:carry+m]); k.IsLog() {
			return k, nil
		}
		if err != nil {
			return Unknown, nil
		}
		end := carry + m
		carry = copy(chunk, chunk[end-overlap:end])
	}
}

// SniffHead sniffs a file by its first 64 KiB only: enough for every form
// but a log whose first memory line comes late. Walking a folder for
// snapshots uses it, so a large file that is none is never read through.
func SniffHead(path string) (Kind, error) { return sniffFile(path, false) }

// sniffHead judges a file by its head: the snapshot forms by the first
// 16 KiB, then traces and logs.
func sniffHead(path string, head []byte) Kind {
	if k := sniffSnapshot(head[:min(len(head), snapshotHead)]); k != Unknown {
		if k == Estimate && isEmptyObject(head) &&
			strings.HasPrefix(strings.ToLower(filepath.Base(path)), "memory_trace") {
			// Megatron's tracker writes {} before its first iteration:
			// that is an empty trace, not an empty estimate.
			return MegatronTrace
		}
		return k
	}
	return sniffTrace(head)
}

// snapshotHead is how much of a file the snapshot forms are judged by.
const snapshotHead = 16 << 10

// sniffSnapshot detects the snapshot and estimate forms (a few KiB are
// enough).
func sniffSnapshot(head []byte) Kind {
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		return Snapshot // gzip: only snapshots are read compressed
	}
	if len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5 {
		return Snapshot
	}
	if SniffTorchSave(head) == SavedSnapshot {
		return Snapshot // torch.save(torch.cuda.memory._snapshot(), path)
	}
	t := bytes.TrimLeft(head, " \t\r\n\xef\xbb\xbf")
	if len(t) == 0 {
		return Unknown
	}
	switch t[0] {
	case '<':
		if bytes.Contains(head, []byte("add_local_files")) || bytes.Contains(head, []byte(`"base64"`)) {
			return Snapshot
		}
	case '{':
		if bytes.Contains(head, []byte(`"peak_memory_mb"`)) || bytes.Contains(head, []byte(`"size_bytes"`)) {
			return Estimate
		}
		if isEmptyObject(t) {
			// The profiler's writer leaves {} when no device had tensors.
			return Estimate
		}
		// Lists under these keys: memscope's own report JSON has a
		// "segments" count, which is not a snapshot.
		if reSnapshotJSONKey.Match(head) {
			return Snapshot
		}
	case '[':
		if bytes.Contains(head, []byte(`"total_size"`)) {
			return Snapshot
		}
	}
	return Unknown
}

var reSnapshotJSONKey = regexp.MustCompile(`"(?:segments|device_traces)"\s*:\s*\[`)

// isEmptyObject reports whether b is "{}" with any whitespace around and
// inside.
func isEmptyObject(b []byte) bool {
	return bytes.Equal(bytes.Join(bytes.Fields(b), nil), []byte("{}"))
}

// SniffWindow is how much of a text Sniff looks at for a log's memory
// lines, and how much SniffFile reads at a time looking for the first.
// Logs can print their first memory line after a long start-up, so text
// gets a generous window.
const SniffWindow = 4 << 20

const sniffLimit = SniffWindow

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

// sniffTrace detects traces, exports and logs from a file's first bytes.
func sniffTrace(head []byte) Kind {
	if len(head) > sniffLimit {
		head = head[:sniffLimit]
	}
	t := bytes.TrimLeft(head, " \t\r\n\xef\xbb\xbf")
	if len(t) == 0 {
		return Unknown
	}
	switch t[0] {
	case '{':
		if bytes.Contains(head, []byte(`"device_mem_stats"`)) ||
			(bytes.Contains(head, []byte(`"snapshots"`)) && bytes.Contains(head, []byte(`"memory_stats"`))) {
			return TitanExport
		}
		if (reMegatronHead.Match(t) && reSamplesArray.Match(head)) || bytes.Equal(bytes.TrimSpace(t), []byte("{}")) {
			return MegatronTrace
		}
	case '[':
		if bytes.Contains(head, []byte(`"device_mem_stats"`)) {
			return TitanExport
		}
	}
	// Logs, which may well start with '[' (timestamps, rank prefixes).
	if bytes.IndexByte(head[:min(len(head), 4096)], 0) >= 0 {
		return Unknown // binary
	}
	if reMegatronMem.Match(head) || reTheoretical.Match(head) {
		return MegatronLog
	}
	if reTorchtitanMe.Match(reANSI.ReplaceAll(head, nil)) {
		return TitanLog
	}
	return Unknown
}

// sniffChunk is how much of a log SniffFile looks at a time (the previous
// chunk's tail included) while looking for its first memory line.
const sniffChunk = SniffWindow

// isBinaryOrJSON says the head is not a log: a NUL byte, or JSON.
func isBinaryOrJSON(head []byte) bool {
	if bytes.IndexByte(head[:min(len(head), 4096)], 0) >= 0 {
		return true
	}
	t := bytes.TrimLeft(head, " \t\r\n\xef\xbb\xbf")
	return len(t) > 0 && t[0] == '{'
}
