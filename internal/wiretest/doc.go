// Package wiretest holds the wire layouts that tests of more than one package
// need and the built-ins do not give: today NoLoRALayout, a release's layout
// without LoRARequest, as a layout file for a release whose LoRA fields are
// unknown gives it. It imports only wire, so the dispatcher's own tests can use
// it (servertest imports the dispatcher).
//
// Only tests import this package.
package wiretest
