package format

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"io"
	"path"
	"strings"
)

// TorchSave is what a file's head says of it as a torch.save archive.
type TorchSave int

const (
	// NotZip: the head is no zip archive's.
	NotZip TorchSave = iota
	// OtherZip: a zip archive whose first member is not torch.save's
	// data.pkl.
	OtherZip
	// SavedOther: a torch.save archive (its first member is data.pkl)
	// whose pickle does not begin as a snapshot's (a checkpoint, a
	// state_dict).
	SavedOther
	// SavedSnapshot: a torch.save archive whose pickle begins with a
	// snapshot's keys, torch.save(torch.cuda.memory._snapshot(), path).
	SavedSnapshot
)

// zipLocalHeader is the size of a zip member's local header before its
// name; the name's length is at 26, the extra field's at 28.
const zipLocalHeader = 30

// ZipMagic begins every zip archive (its first local header).
var ZipMagic = []byte("PK\x03\x04")

// IsTorchDataPkl says whether a zip member's name is the pickle torch.save
// writes: data.pkl at the top of the archive's one folder (named after the
// file: "snapshot/data.pkl" for snapshot.pt) or, written by hand, at its
// root.
func IsTorchDataPkl(name string) bool {
	dir, file := path.Split(name)
	return file == "data.pkl" && strings.Count(dir, "/") <= 1
}

// SniffTorchSave judges head, the start of a file. PyTorch (1.6 on) writes
// data.pkl first, stored, so its first bytes are in the head; a member
// compressed by another tool is inflated as far as the head goes.
func SniffTorchSave(head []byte) TorchSave {
	if !bytes.HasPrefix(head, ZipMagic) {
		return NotZip
	}
	if len(head) < zipLocalHeader {
		return OtherZip
	}
	method := binary.LittleEndian.Uint16(head[8:])
	nameLen := int(binary.LittleEndian.Uint16(head[26:]))
	extraLen := int(binary.LittleEndian.Uint16(head[28:]))
	if len(head) < zipLocalHeader+nameLen || !IsTorchDataPkl(string(head[zipLocalHeader:zipLocalHeader+nameLen])) {
		return OtherZip
	}
	var pkl []byte
	if start := zipLocalHeader + nameLen + extraLen; start < len(head) {
		switch method {
		case 0: // stored
			pkl = head[start:]
		case 8: // deflated
			pkl, _ = io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(head[start:])), torchPeek))
		}
	}
	pkl = pkl[:min(len(pkl), torchPeek)]
	// A snapshot is a dict whose keys come first: pickle.dump and
	// torch.save write "segments" (or, hand-made, "device_traces") within
	// its first bytes, as BINUNICODE or SHORT_BINUNICODE.
	if len(pkl) >= 2 && pkl[0] == 0x80 &&
		(bytes.Contains(pkl, []byte("segments")) || bytes.Contains(pkl, []byte("device_traces"))) {
		return SavedSnapshot
	}
	return SavedOther
}

// torchPeek is how much of data.pkl SniffTorchSave reads for a snapshot's
// keys.
const torchPeek = 256
