package kvindex

import "fmt"

// ConfigError names the Config field that New refused and why.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("kvindex: config: %s %s", e.Field, e.Reason)
}
