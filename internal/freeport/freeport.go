// Package freeport finds runs of consecutive free tcp ports, for engines whose
// KV-event sockets vLLM places at a base port plus the data-parallel rank.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// Run returns the first of n consecutive tcp ports in 20000..60000 that were free on
// host ("" = every interface) when tried. Another process may take one before its
// user binds it; that bind then fails, loudly.
func Run(host string, n int) (int, error) {
	const lo, hi = 20000, 60000
	for range 100 {
		base := lo + rand.IntN(hi-lo-n)
		if free(host, base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free tcp ports in %d..%d", n, lo, hi)
}

func free(host string, base, n int) bool {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			return false
		}
		ls = append(ls, l)
	}
	return true
}
