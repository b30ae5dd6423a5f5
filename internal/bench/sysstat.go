package bench

import (
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procSnap is a process's cost counters at one instant.
type procSnap struct {
	at     time.Time
	cpu    time.Duration // user + system
	allocs uint64        // heap objects allocated since start (this process only)
	bytes  uint64        // heap bytes allocated since start (this process only)
}

var allocSamples = []metrics.Sample{
	{Name: "/gc/heap/allocs:objects"},
	{Name: "/gc/heap/allocs:bytes"},
}

// snapSelf reads this process's counters. runtime/metrics does not stop the world, so
// sampling does not disturb the latencies being measured.
func snapSelf() procSnap {
	s := procSnap{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	samples := make([]metrics.Sample, len(allocSamples))
	copy(samples, allocSamples)
	metrics.Read(samples)
	s.allocs = samples[0].Value.Uint64()
	s.bytes = samples[1].Value.Uint64()
	return s
}

// snapPID reads another process's CPU from /proc/PID/stat (fields 14 and 15, in
// clock ticks). Allocations of another process are not visible and stay zero.
func snapPID(pid int) procSnap {
	s := procSnap{at: time.Now()}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return s
	}
	// The command name (field 2) may hold spaces; fields resume after its ')'.
	str := string(b)
	if i := strings.LastIndexByte(str, ')'); i >= 0 {
		f := strings.Fields(str[i+1:])
		if len(f) > 12 {
			ut, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			const ticks = 100 // USER_HZ: 100 on every Linux this runs on
			s.cpu = time.Duration(ut+st) * time.Second / ticks
		}
	}
	return s
}

// rssBytes reads VmRSS of pid (0 = self) from /proc; 0 when unavailable.
func rssBytes(pid int) int64 {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
