package cluster

import (
	"fmt"
	"slices"
)

// Client is one frontend's entry in the client table: its client index and
// the two addresses every engine connects to for it (one input ROUTER and
// one output PULL, shared by all ranks, as vLLM's API servers bind them).
type Client struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	Input  string `json:"input"`
	Output string `json:"output"`
}

// Table is the client table, ordered by index.
type Table []Client

// Sorted returns t ordered by index.
func (t Table) Sorted() Table {
	out := slices.Clone(t)
	slices.SortFunc(out, func(a, b Client) int { return a.Index - b.Index })
	return out
}

// Lookup returns the entry of name.
func (t Table) Lookup(name string) (Client, bool) {
	for _, c := range t {
		if c.Name == name {
			return c, true
		}
	}
	return Client{}, false
}

// FreeIndex is the lowest index nobody holds: indexes stay dense, so INIT's
// lists have no holes.
func (t Table) FreeIndex() int {
	used := make(map[int]bool, len(t))
	for _, c := range t {
		used[c.Index] = true
	}
	i := 0
	for used[i] {
		i++
	}
	return i
}

// Place decides where name goes: its old entry when it has one (a restarted
// frontend must come back on the same addresses, because every running
// engine holds them in its INIT), else the lowest free index.
func (t Table) Place(name, input, output string) (Client, bool, error) {
	if c, ok := t.Lookup(name); ok {
		if c.Input != input || c.Output != output {
			return Client{}, false, fmt.Errorf("cluster: frontend %q holds client index %d with input %s and output %s, and the engines hold those addresses: start it with the same ones (or remove it from the table, then restart every engine)", name, c.Index, c.Input, c.Output)
		}
		return c, false, nil
	}
	for _, c := range t {
		if c.Input == input || c.Output == output {
			return Client{}, false, fmt.Errorf("cluster: address already taken by frontend %q (client index %d)", c.Name, c.Index)
		}
	}
	return Client{Index: t.FreeIndex(), Name: name, Input: input, Output: output}, true, nil
}

// Addresses are INIT's input and output lists: entry i is client index i's.
// It fails when the table has a hole (an engine would send a client's
// outputs to another one).
func (t Table) Addresses() (inputs, outputs []string, err error) {
	s := t.Sorted()
	for i, c := range s {
		if c.Index != i {
			return nil, nil, fmt.Errorf("cluster: client table has no client index %d (next is %d, frontend %q)", i, c.Index, c.Name)
		}
		inputs = append(inputs, c.Input)
		outputs = append(outputs, c.Output)
	}
	return inputs, outputs, nil
}
