package engine

import "time"

// NowNS is the clock every bench timestamp is read from: wall-clock nanoseconds, so
// that child engine processes on the same host read the same clock as the client.
// Within one process Go's wall clock is read through the vDSO like the monotonic one;
// a clock step during a run would show as clamped samples (see Hist.Record).
func NowNS() int64 { return time.Now().UnixNano() }

// monoSeconds fills EngineCoreOutputs.timestamp, which vLLM engines set from their
// monotonic clock; only its presence matters to a frontend.
func monoSeconds() float64 { return float64(time.Now().UnixNano()) / 1e9 }
