package bootstrap

// The admin guard's pieces, exported so the API server's admin endpoints
// (POST /v1/engines/{rank}/drain) are protected exactly as the registry's /v2
// admin API is: a bearer token compared in constant time, and a list of
// networks (loopback by default) that may call at all.

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// ParseAdminNetworks parses CIDRs or bare IPs (loopback only when cidrs is
// empty) and refuses a non-loopback network without a token: its mutations
// would be open to anyone there. what prefixes the errors (the flag or field).
func ParseAdminNetworks(what string, cidrs []string, token string) ([]*net.IPNet, error) {
	if len(cidrs) == 0 {
		cidrs = []string{"127.0.0.0/8", "::1/128"}
	}
	nets := make([]*net.IPNet, 0, len(cidrs))
	for _, s := range cidrs {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			if ip := net.ParseIP(s); ip != nil {
				bits := 8 * len(ip.To16())
				if ip.To4() != nil {
					ip, bits = ip.To4(), 32
				}
				n = &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}
			} else {
				return nil, fmt.Errorf("%s %q: want a CIDR or an IP", what, s)
			}
		}
		if !n.IP.IsLoopback() && token == "" {
			return nil, fmt.Errorf("%s %q is not loopback: set the Token (--admin-token, --token) too, or anyone there can delete and drain engines", what, s)
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// FromNetworks reports whether r's remote address is inside one of nets. A
// request with forwarding headers (Forwarded, X-Forwarded-For, X-Real-IP) came
// through a proxy, so a loopback remote address says nothing about the caller:
// it is never taken as local.
func FromNetworks(r *http.Request, nets []*net.IPNet) bool {
	ip := net.ParseIP(remoteIP(r))
	if ip == nil || (ip.IsLoopback() && Forwarded(r)) {
		return false
	}
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// Forwarded reports whether r carries any forwarding header a proxy adds.
func Forwarded(r *http.Request) bool {
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"} {
		if _, ok := r.Header[h]; ok {
			return true
		}
	}
	return false
}

// BearerMatches reports whether header is "Bearer TOKEN" (the scheme in any
// case, as RFC 7235 has it and the --api-key check takes it) for token,
// compared in constant time.
func BearerMatches(header, token string) bool {
	scheme, got, ok := strings.Cut(header, " ")
	return ok && strings.EqualFold(scheme, "bearer") && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}
