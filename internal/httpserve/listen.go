package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ListenConfig configures Listen: the HTTP socket and the guards on its
// connections (conn.go).
type ListenConfig struct {
	Address string // HOST:PORT
	// MaxConnections caps open HTTP connections (lowered to fit the open-file
	// limit); 0 = no cap. OtherConnections are the descriptors the rest of the
	// process may hold (the client protocol's connections), kept out of it.
	MaxConnections, OtherConnections int
	// WriteTimeout bounds each piece of a write; 0 = none.
	WriteTimeout time.Duration
	// HeaderTimeout and IdleTimeout are net/http's ReadHeaderTimeout and IdleTimeout.
	HeaderTimeout, IdleTimeout time.Duration
	Registerer                 prometheus.Registerer
	Logger                     *slog.Logger
}

// Server is the HTTP server: the listener behind its connection guards and the
// net/http server that serves the API's handler. Serve runs it on a goroutine
// that Close and Shutdown join.
type Server struct {
	srv  *http.Server
	ln   *connLimiter
	done chan struct{} // closed when Serve's goroutine returned; nil before Serve
}

// Listen binds cfg.Address and prepares h to be served; nothing is accepted
// before Serve.
func Listen(cfg ListenConfig, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("--http-address: %w", err)
	}
	limiter := newConnLimiter(ln, fitConnections(cfg.MaxConnections, cfg.OtherConnections, cfg.Logger))
	limiter.writeTimeout = cfg.WriteTimeout
	if err := limiter.register(cfg.Registerer); err != nil {
		ln.Close()
		return nil, fmt.Errorf("http: %w", err)
	}
	return &Server{ln: limiter, srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.HeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout, // no WriteTimeout: a stream lasts as long as its request (the limiter bounds each write)
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         limiter.ConnState,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}}, nil
}

// Serve accepts connections on a goroutine until Shutdown or Close; fail is
// called if serving stops on its own.
func (s *Server) Serve(fail func(error)) {
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fail(fmt.Errorf("http: %w", err))
		}
	}()
}

// Addr is the bound address (HOST:PORT).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// StopKeepAlives closes each connection after its current request, so a
// request that arrives while in-flight ones drain gets its answer (a 503) and
// the connection closes.
func (s *Server) StopKeepAlives() { s.srv.SetKeepAlivesEnabled(false) }

// StalledWrites counts the writes that failed at the write timeout.
func (s *Server) StalledWrites() int64 { return s.ln.stalled.Load() }

// Shutdown stops the server gracefully (net/http's Shutdown), bounded by ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	s.wait()
	return err
}

// Close closes the listener and every connection, and joins Serve's goroutine.
func (s *Server) Close() {
	if s.done == nil {
		s.ln.Close()
		return
	}
	s.srv.Close()
	s.wait()
}

func (s *Server) wait() {
	if s.done != nil {
		<-s.done
	}
}
