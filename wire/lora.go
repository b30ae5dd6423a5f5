package wire

// LoRARequest outside an ADD: the add_lora utility's single argument. The engine
// converts that argument to its own LoRARequest struct (array_like), so the array
// is positional in the engine's release's field order, as inside an ADD.

// HasLoRA reports whether the layout knows LoRARequest's fields: only then can a
// LoRA request, or an add_lora call, be written for its engines.
func (l *Layout) HasLoRA() bool { return l.lora != nil }

// AppendLoRAArgs appends the add_lora argument array [LoRARequest] in l's field
// order. A layout without LoRARequest's fields is a *LayoutError; a value the
// engine would reject (id < 1, empty path, bad UTF-8) is a *ValidationError.
func (l *Layout) AppendLoRAArgs(b []byte, lr *LoRARequest) ([]byte, error) {
	if err := l.loraCarries(lr); err != nil {
		return b, err
	}
	if err := lr.engineAccepts(); err != nil {
		return b, err
	}
	if lr.Name == "" {
		return b, invalid("lora_name", "must not be empty")
	}
	b = appendArrayHeader(b, 1)
	return l.appendLoRA(b, lr), nil
}

// DecodeLoRAArgs reads add_lora's argument array [LoRARequest] in l's field order
// (what an engine of that release decodes).
func (l *Layout) DecodeLoRAArgs(args Raw) (*LoRARequest, error) {
	const typ = "add_lora"
	if l.lora == nil {
		return nil, &LayoutError{Layout: l.Name, Field: "lora_request", Msg: "LoRARequest's fields are unknown for this layout"}
	}
	r := reader{b: args, text: true}
	n, err := r.arrayHeader()
	if err != nil {
		return nil, fieldErr(err, typ, "")
	}
	if n != 1 {
		return nil, &DecodeError{Type: typ, Offset: r.off, Msg: "want 1 argument, got " + itoa(n)}
	}
	lr := new(LoRARequest)
	if err := r.lora(lr, l.lora); err != nil {
		return nil, err
	}
	return lr, nil
}
