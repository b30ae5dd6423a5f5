package httpserve

// The HTTP listener's edge: a cap on open connections that keeps room for real
// requests, and JSON for the answers net/http writes on its own.
//
// Without a cap, 20,200 idle connections used up the process's file descriptors
// and /health timed out for everyone (accept4: too many open files). A plain cap
// (stop accepting at N) would starve /health the same way, only sooner. So at the
// cap the oldest connection that is not in a request (never sent one, or idle
// between keep-alive requests) is closed to make room; only when every connection
// is in a request is the new one answered 503 with Retry-After and closed.
//
// Every write has a deadline (--http-write-timeout). A streaming client that
// stopped reading (a tiny receive window, never drained) otherwise held its
// handler blocked in Write for ever, and with it its request slot and buffers,
// long after the dispatcher had aborted its requests as a slow consumer. A write
// the client does not take in time fails; net/http then cancels the request's
// context (the engine requests are aborted), the handler returns (its slot is
// freed), and the connection is closed with a reset, dropping what the kernel
// still held for it.

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// connLimiter wraps the HTTP listener. Its ConnState must be installed as the
// http.Server's ConnState hook, which is how it learns which connections are idle.
type connLimiter struct {
	net.Listener
	max int
	// writeTimeout bounds each piece of a write (writePiece bytes); 0 = none.
	writeTimeout time.Duration

	mu      sync.Mutex
	open    int
	idle    *list.List // of *trackedConn, oldest first: New or Idle, not in a request
	evicted atomic.Int64
	refused atomic.Int64
	stalled atomic.Int64 // writes failed at writeTimeout
}

// writePiece is how much of a write must be taken within the write timeout: a
// large answer to a slow but reading client is not cut, one that reads nothing is.
const writePiece = 64 << 10

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, idle: list.New()}
}

// Accept returns the next connection, making room at the cap first.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, l: l}
		l.mu.Lock()
		var victim *trackedConn
		if l.max > 0 && l.open >= l.max {
			if front := l.idle.Front(); front != nil {
				victim = front.Value.(*trackedConn)
				l.idle.Remove(front)
				victim.elem = nil
			}
		}
		if l.max > 0 && l.open >= l.max && victim == nil {
			l.mu.Unlock()
			l.refused.Add(1)
			refuseConn(c)
			continue
		}
		l.open++
		tc.elem = l.idle.PushBack(tc) // StateNew: not in a request yet
		l.mu.Unlock()
		if victim != nil {
			// Closing makes the server's read fail; its close then frees the slot.
			l.evicted.Add(1)
			_ = victim.Conn.Close()
		}
		return tc, nil
	}
}

// register exposes the limiter's figures: how often the cap was met matters more
// than any one refusal, so these are counted rather than logged.
func (l *connLimiter) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchyard_http_connections_open",
			Help: "Open HTTP connections (--max-connections caps them).",
		}, func() float64 { l.mu.Lock(); defer l.mu.Unlock(); return float64(l.open) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchyard_http_connections_evicted_total",
			Help: "Connections not in a request closed at the --max-connections cap to make room for a new one.",
		}, func() float64 { return float64(l.evicted.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchyard_http_connections_refused_total",
			Help: "New connections answered 503 at the --max-connections cap because every open one was in a request.",
		}, func() float64 { return float64(l.refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchyard_http_write_timeouts_total",
			Help: "HTTP connections closed because the client did not take a write within --http-write-timeout (it stopped reading).",
		}, func() float64 { return float64(l.stalled.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// refuseConn answers a connection over the cap without reading its request.
func refuseConn(c net.Conn) {
	body := errorJSON(http.StatusServiceUnavailable, "ServiceUnavailableError", "too many open connections; retry later")
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	_ = c.Close()
}

// ConnState tracks whether each connection is in a request.
func (l *connLimiter) ConnState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateIdle:
		if tc.elem == nil && !tc.closed {
			tc.elem = l.idle.PushBack(tc)
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		if tc.elem != nil {
			l.idle.Remove(tc.elem)
			tc.elem = nil
		}
	}
}

func (l *connLimiter) closed(tc *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tc.closed {
		return
	}
	tc.closed = true
	l.open--
	if tc.elem != nil {
		l.idle.Remove(tc.elem)
		tc.elem = nil
	}
}

// trackedConn counts itself out of the limiter when closed, and turns net/http's
// own plain-text error answers into the API's JSON error shape.
type trackedConn struct {
	net.Conn
	l *connLimiter
	// Guarded by l.mu.
	elem   *list.Element
	closed bool
	// stalled is set once a write timed out: later writes fail at once, and
	// Close resets the connection.
	stalled atomic.Bool
}

func (c *trackedConn) Close() error {
	c.l.closed(c)
	if tcp, ok := c.Conn.(*net.TCPConn); ok && c.stalled.Load() {
		// The client reads nothing: discard the unsent data instead of the kernel
		// keeping it (and retrying) after the close.
		_ = tcp.SetLinger(0)
	}
	return c.Conn.Close()
}

func (c *trackedConn) Write(b []byte) (int, error) {
	if j := rewriteStdlibError(b); j != nil {
		if _, err := c.write(j); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.write(b)
}

// write writes b in pieces, each with the write timeout as its deadline.
// (net/http only sets a write deadline with Server.WriteTimeout, which bounds a
// whole answer, a stream's too, and clears it after each request.)
func (c *trackedConn) write(b []byte) (int, error) {
	d := c.l.writeTimeout
	if d <= 0 {
		return c.Conn.Write(b)
	}
	if c.stalled.Load() {
		return 0, os.ErrDeadlineExceeded
	}
	n := 0
	for n < len(b) {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(d))
		m, err := c.Conn.Write(b[n:min(len(b), n+writePiece)])
		n += m
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && !c.stalled.Swap(true) {
				c.l.stalled.Add(1)
			}
			return n, err
		}
	}
	return n, nil
}

// stdlibErrorHeaders is what net/http writes after the status line of the answers
// it makes itself (a malformed request, headers too large): text/plain, then close.
const stdlibErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// rewriteStdlibError returns b rewritten as a JSON error answer when b is one of
// net/http's own error answers (written in one piece straight to the connection),
// else nil. Handler answers never match: they are JSON, or text with another
// Content-Type, and never carry these exact headers right after the status line.
func rewriteStdlibError(b []byte) []byte {
	const prefix = "HTTP/1.1 "
	if len(b) > 4096 || !bytes.HasPrefix(b, []byte(prefix)) {
		return nil
	}
	eol := bytes.Index(b, []byte("\r\n"))
	if eol < 0 || !bytes.HasPrefix(b[eol:], []byte(stdlibErrorHeaders)) || eol < len(prefix)+3 {
		return nil
	}
	code, err := strconv.Atoi(string(b[len(prefix) : len(prefix)+3]))
	if err != nil || code < 400 {
		return nil
	}
	msg := string(b[eol+len(stdlibErrorHeaders):])
	typ := "BadRequestError"
	if code >= 500 {
		typ = "InternalServerError"
		if code == http.StatusNotImplemented {
			typ = "NotImplementedError"
		}
	}
	body := errorJSON(code, typ, msg)
	status := fmt.Sprintf("%d %s", code, http.StatusText(code))
	return fmt.Appendf(nil, "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", status, len(body), body)
}

// errorJSON is an error answer in OpenAI's shape, as the API's own errors are
// (httpapi.ErrorBody): the connection layer answers before any handler runs.
func errorJSON(code int, typ, msg string) []byte {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	}
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{detail{msg, typ, nil, code}})
	return b
}
