// Package httpserve is the HTTP server under the API: the listener behind its
// connection guards and the net/http server that serves one handler.
//
// The guards bound what a connection can cost before any handler runs: at
// --max-connections an idle connection is closed for a new one and, with every
// connection in a request, the new one gets a 503 (the cap is lowered to fit the
// open-file limit); each write piece has a deadline (--http-write-timeout), so a
// client that stops reading has its connection closed and its request cancelled;
// net/http's own plain-text errors (a 431, a bad request line) are rewritten into
// the API's JSON error shape. The composition root (internal/server) wires it:
//
//	srv, err := httpserve.Listen(httpserve.ListenConfig{Address: addr, ...}, api.Handler())
//	srv.Serve(fail)       // on its own goroutine, joined by Close and Shutdown
//	defer srv.Close()
package httpserve
