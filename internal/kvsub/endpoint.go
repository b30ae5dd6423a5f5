package kvsub

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Resolved is where switchyard meets one rank's publisher.
type Resolved struct {
	// Addr is the endpoint switchyard dials (or binds when Bind).
	Addr string
	// Bind: the engine connects to the endpoint (a concrete tcp host, as vLLM's
	// publisher does for one), so switchyard binds it.
	Bind bool
}

// Resolve turns an endpoint as given to vLLM (`--kv-events-config`'s endpoint or
// replay_endpoint) into where switchyard meets rank's socket. vLLM offsets the port
// by the data-parallel rank (tcp: port + rank; inproc: "_dp<rank>" appended; any
// other scheme with rank > 0 is an error there too). The engine binds an endpoint
// with a wildcard host ("*", "::", "0.0.0.0") or an ipc path, and switchyard dials
// it, at remoteHost (the host the engine's handshake came from) in place of the
// wildcard; it connects to any other tcp host, which switchyard then binds.
// replay is true for a replay endpoint, whose ROUTER vLLM always binds.
func Resolve(endpoint string, rank int, remoteHost string, replay bool) (Resolved, error) {
	scheme, rest, ok := strings.Cut(endpoint, "://")
	if !ok {
		return Resolved{}, fmt.Errorf("kvsub: endpoint %q: want tcp://HOST:PORT or ipc://PATH", endpoint)
	}
	switch scheme {
	case "ipc":
		if rank > 0 {
			return Resolved{}, fmt.Errorf("kvsub: endpoint %q: vLLM offsets only tcp and inproc endpoints by rank, rank %d cannot use ipc", endpoint, rank)
		}
		return Resolved{Addr: endpoint}, nil
	case "inproc":
		return Resolved{}, fmt.Errorf("kvsub: endpoint %q: inproc lives inside the engine's process; give vLLM a tcp or ipc endpoint", endpoint)
	case "tcp":
	default:
		return Resolved{}, fmt.Errorf("kvsub: endpoint %q: unsupported scheme %q", endpoint, scheme)
	}
	host, portS, err := net.SplitHostPort(rest)
	if err != nil {
		return Resolved{}, fmt.Errorf("kvsub: endpoint %q: %v", endpoint, err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port <= 0 || port+rank > 65535 {
		return Resolved{}, fmt.Errorf("kvsub: endpoint %q: bad port for rank %d", endpoint, rank)
	}
	port += rank
	if isWildcard(host) {
		if remoteHost == "" {
			return Resolved{}, fmt.Errorf("kvsub: endpoint %q has a wildcard host and rank %d's handshake came over no tcp connection: name the engine's host with --kv-events-endpoint", endpoint, rank)
		}
		return Resolved{Addr: "tcp://" + net.JoinHostPort(remoteHost, strconv.Itoa(port))}, nil
	}
	return Resolved{Addr: "tcp://" + net.JoinHostPort(host, strconv.Itoa(port)), Bind: !replay}, nil
}

func isWildcard(host string) bool {
	return host == "*" || host == "::" || host == "0.0.0.0" || host == ""
}
