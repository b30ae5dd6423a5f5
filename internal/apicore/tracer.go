package apicore

import (
	"context"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/switchyard-llm/switchyard/internal/version"
)

// NewTracerProvider exports spans in batches to endpoint, an OTLP/HTTP URL
// ("http://collector:4318"; with no path, the standard /v1/traces is used).
func NewTracerProvider(endpoint string) (*sdktrace.TracerProvider, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--otlp-traces-endpoint: %q: want an OTLP/HTTP URL such as http://HOST:4318", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("--otlp-traces-endpoint: %w", err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", "switchyard"),
		attribute.String("service.version", version.Get().Version),
	)
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
