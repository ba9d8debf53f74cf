package pages

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// madvHugepage is MADV_HUGEPAGE.
const madvHugepage = 14

// Huge advises nothing (hugeOff) under GODEBUG's disablethp=1, which asks
// Go's runtime to keep its heap off huge pages (for systems where they cost
// memory), or on a virtual machine whose host takes back free huge pages
// (reportsFreePages). Each is read once.
var (
	thpDisabled  = strings.Contains(","+os.Getenv("GODEBUG")+",", ",disablethp=1,")
	hostReclaims = sync.OnceValue(func() bool { return reportsFreePages("/sys") }) // at the first Huge, not at start
)

func hugeOff() bool { return thpDisabled || hostReclaims() }

// reportsFreePages says whether the machine is a virtual one whose memory
// balloon reports free pages to its host (virtio's
// VIRTIO_BALLOON_F_REPORTING, feature bit 5) in blocks no larger than a
// huge page (page_reporting_order up to 9). The host then takes back the
// memory of the free blocks a huge page is made from, and a fault that
// maps one waits for the host to give 2 MiB again: on this project's VM,
// 128 MiB written through huge pages took 180-290 ms, through small pages
// 60-80 (unless the huge pages were freed just before, 11 ms), and a
// report of the 217 MB frame pool right after pickle.load took 0.39 s
// with huge pages, 0.33 without. sysfs is where sysfs is mounted.
func reportsFreePages(sysfs string) bool {
	if b, err := os.ReadFile(sysfs + "/module/page_reporting/parameters/page_reporting_order"); err == nil {
		if order, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && order > hugeOrder {
			return false // blocks of a huge page are not reported
		}
	}
	devs, _ := filepath.Glob(sysfs + "/bus/virtio/devices/*")
	for _, d := range devs {
		id, err := os.ReadFile(filepath.Join(d, "device"))
		if err != nil || strings.TrimSpace(string(id)) != virtioBalloon {
			continue
		}
		// features is one character per bit, bit 0 first.
		if f, err := os.ReadFile(filepath.Join(d, "features")); err == nil && len(f) > balloonReporting && f[balloonReporting] == '1' {
			return true
		}
	}
	return false
}

// virtioBalloon is the balloon's virtio device id; balloonReporting its
// free page reporting feature bit; hugeOrder the order of a huge page of
// 4 KiB pages.
const (
	virtioBalloon    = "0x0005"
	balloonReporting = 5
	hugeOrder        = 9
)

// Huge asks the kernel to back s's whole 2 MiB pages with huge pages where
// it maps them from now on. It changes no byte, and does nothing where
// transparent huge pages are off, GODEBUG has disablethp=1, the machine's
// host takes back free pages (reportsFreePages), or s holds no whole huge
// page.
func Huge[T any](s []T) {
	if hugeOff() {
		return
	}
	var zero T
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	end := start + uintptr(len(s))*unsafe.Sizeof(zero)
	lo := (start + HugeSize - 1) &^ (HugeSize - 1)
	hi := end &^ (HugeSize - 1)
	if hi <= lo {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, madvHugepage)
}
