package coordinator

import (
	"errors"
	"fmt"
)

// Sentinel errors.
var (
	// ErrClosed is returned by Start after Close, and by calls on a closed node.
	ErrClosed = errors.New("coordinator: closed")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("coordinator: already started")
)

// ConfigError names the configuration field at fault.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("coordinator: config: %s: %s", e.Field, e.Msg)
}

// SocketError says which socket failed and how.
type SocketError struct {
	Socket   string // "input", "output", "publish", "stats"
	Endpoint string
	Cause    error
}

func (e *SocketError) Error() string {
	return fmt.Sprintf("coordinator: %s socket %s: %v", e.Socket, e.Endpoint, e.Cause)
}

func (e *SocketError) Unwrap() error { return e.Cause }
