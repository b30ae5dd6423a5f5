package bench

import (
	"context"
	"errors"
)

// startEmbedded starts an in-process switchyard whose engines are the bench's.
func startEmbedded(context.Context, Config) (system, error) {
	return nil, errors.New("bench: the embedded switchyard is not wired yet")
}
