// Package servertest holds the test doubles shared by the serving packages'
// tests (the composition root, the HTTP API, the client protocol and the text
// pipeline): FakeEngines, a dispatcher over fake engines that answer each ADD
// from one goroutine as the frontend's output loops do.
//
// NewFakeCore starts the dispatcher and its engines loop and registers a
// t.Cleanup that closes both and joins the loop (bounded by testwait), so a
// test needs no teardown of its own. What the engines receive shows on the
// buffered channels (Adds, Aborts, Keys); Hold, After and Refuse change how
// they answer and may be set from any goroutine. RawRequest sends bytes as
// given, for what an HTTP client library would not send. BertPairTokenizerJSON is
// a tiny tokenizer with BERT's pair template, for scoring tests.
//
// Only tests import this package.
package servertest
