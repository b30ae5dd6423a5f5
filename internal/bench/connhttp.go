package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// httpConn drives POST /v1/completions (stream true or false), one goroutine per request in
// flight: an HTTP client has no other way to wait on many streams, and this is the
// load generator, not the product. Its own cost is part of what the HTTP figures show.
type httpConn struct {
	url    string
	cfg    Config
	sse    bool
	sink   sink
	client *http.Client
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc // close abandons streams still open after the drain
}

func newHTTPConn(target string, cfg Config, s sink, stream bool) *httpConn {
	tr := &http.Transport{MaxIdleConnsPerHost: 4096, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	return &httpConn{
		url: strings.TrimSuffix(target, "/") + "/v1/completions", cfg: cfg, sink: s, sse: stream,
		client: &http.Client{Transport: tr}, ctx: ctx, cancel: cancel,
	}
}

type completionBody struct {
	Model     string  `json:"model"`
	Prompt    []int64 `json:"prompt"`
	MaxTokens int     `json:"max_tokens"`
	Stream    bool    `json:"stream"`
	IgnoreEOS bool    `json:"ignore_eos"`
	RequestID string  `json:"request_id,omitempty"`
}

type completionChunk struct {
	Choices []struct {
		TokenIDs     []int64 `json:"token_ids"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

func (c *httpConn) submit(seq int64, req *wire.EngineCoreRequest) error {
	body, err := json.Marshal(completionBody{
		Model: "bench", Prompt: req.PromptTokenIDs, MaxTokens: c.cfg.OutputTokens,
		Stream: c.sse, IgnoreEOS: true, RequestID: req.RequestID,
	})
	if err != nil {
		return err
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := c.stream(seq, body); err != nil {
			c.sink.failed(seq, nowNS())
		}
	}()
	return nil
}

func (c *httpConn) stream(seq int64, body []byte) error {
	hreq, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: %s: %s", c.url, resp.Status)
	}
	if !c.sse {
		return c.whole(seq, resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		now := nowNS()
		if string(data) == "[DONE]" {
			return nil
		}
		var ch completionChunk
		if err := json.Unmarshal(data, &ch); err != nil || len(ch.Choices) == 0 {
			continue
		}
		ch0 := ch.Choices[0]
		fin := ch0.FinishReason != nil && *ch0.FinishReason != ""
		if fin && (*ch0.FinishReason == "abort" || *ch0.FinishReason == "error") {
			return fmt.Errorf("bench: request finished with %s", *ch0.FinishReason)
		}
		c.sink.output(seq, len(ch0.TokenIDs), fin, now)
		if fin {
			// Read to [DONE] so the connection is reused, but the request is over.
			for sc.Scan() {
			}
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("bench: stream ended without a finish reason")
}

// whole reads a JSON answer: every token arrives at once, with the finish.
func (c *httpConn) whole(seq int64, resp *http.Response) error {
	b, err := io.ReadAll(resp.Body)
	now := nowNS()
	if err != nil {
		return err
	}
	var ch completionChunk
	if err := json.Unmarshal(b, &ch); err != nil || len(ch.Choices) != 1 {
		return fmt.Errorf("bench: bad completion answer %.200q", b)
	}
	ch0 := ch.Choices[0]
	if ch0.FinishReason == nil || *ch0.FinishReason == "abort" || *ch0.FinishReason == "error" {
		return fmt.Errorf("bench: completion answer without a good finish: %.200q", b)
	}
	c.sink.output(seq, len(ch0.TokenIDs), true, now)
	return nil
}

func (c *httpConn) close() error {
	c.cancel()
	c.wg.Wait()
	c.client.CloseIdleConnections()
	return nil
}
