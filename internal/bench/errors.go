package bench

import (
	"errors"
	"fmt"
)

// Sentinel errors.
var (
	// ErrNoSamples is returned when a run measured nothing (every request failed or
	// the measured phase was empty), so no figure can be stated honestly.
	ErrNoSamples = errors.New("bench: no measured requests")
	// ErrSchema is returned by ReadReport for a file that is not a bench report.
	ErrSchema = errors.New("bench: not a switchyard bench report")
)

// ConfigError names the configuration field at fault.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("bench: config %s: %s", e.Field, e.Msg) }
