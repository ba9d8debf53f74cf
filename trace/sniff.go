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
	reTheoretical  = regexp.MustCompile(`Theoretical memory footprints:`)
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
		if bytes.Contains(head, []byte(`"device_mem_stats"`)) {
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

// SniffFile sniffs the head of a file.
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
	if k == "" && n == len(buf) {
		// A log whose memory lines come late: look further.
		more := make([]byte, sniffLimit)
		copy(more, buf)
		m, _ := io.ReadFull(f, more[n:])
		k = Sniff(more[:n+m])
		if k != KindMegatronLog && k != KindTorchtitanLog {
			k = ""
		}
	}
	return k, nil
}
