package httpserve

import (
	"log/slog"
	"syscall"
)

// maxHeaderBytes bounds a request's headers (net/http's default is 1 MiB; uvicorn,
// under vLLM, refuses past 16 KiB). Larger headers get a 431.
const maxHeaderBytes = 64 << 10

// fdReserve is the file descriptors kept for everything but HTTP connections:
// engine and client sockets, ipc files, logs.
const fdReserve = 512

// fitConnections lowers want to what the process's file limit leaves after
// fdReserve and the client protocol's own cap (others), so the cap is reached
// before accept fails with EMFILE (which starves every client, /health included).
// It logs when it lowers.
func fitConnections(want, others int, log *slog.Logger) int {
	var lim syscall.Rlimit
	if want <= 0 || syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil || lim.Cur > 1<<31 {
		return want
	}
	room := int(lim.Cur) - fdReserve - others
	if room < 16 {
		room = 16
	}
	if want > room {
		log.Warn("--max-connections lowered to fit the open-file limit", "max_connections", room, "asked", want, "nofile", lim.Cur)
		return room
	}
	return want
}
