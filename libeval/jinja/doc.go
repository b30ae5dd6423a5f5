// Package jinja re-runs the chat-template library evaluation: the differential
// cases of chattemplate (its testdata templates and conversations, the real
// models' templates, the snippets) rendered by Python jinja2 through
// chattemplate/testdata/reference.py, then by each Go candidate and by
// chattemplate. The test logs a byte-equal count per candidate and fails only
// if chattemplate itself misses a case.
package jinja
