package server

import (
	"net"
	"strings"
)

// checkClientToken refuses a client protocol open to the network while the
// HTTP API requires keys: the client protocol reaches the same engines, so
// without a token it would serve anyone the keys keep out.
func (c Config) checkClientToken() error {
	if strings.ContainsAny(c.ClientToken, " \t\r\n") {
		return bad("client-token", "must contain no whitespace")
	}
	if len(c.APIKeys) == 0 || c.ClientToken != "" || c.ClientAddress == "" || loopbackEndpoint(c.ClientAddress) {
		return nil
	}
	return bad("client-token", "required with --api-key when --client-address (%s) is not loopback: "+
		"the client protocol would serve anyone who reaches it, around the API keys "+
		"(or bind --client-address to 127.0.0.1 or ipc://)", c.ClientAddress)
}

// loopbackEndpoint: an ipc:// endpoint, or tcp:// on localhost or a
// loopback IP. A wildcard (*, 0.0.0.0) or any other name is not.
func loopbackEndpoint(ep string) bool {
	if strings.HasPrefix(ep, "ipc://") {
		return true
	}
	host, _, err := net.SplitHostPort(strings.TrimPrefix(ep, "tcp://"))
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
