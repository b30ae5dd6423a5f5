package tokenizer

// knownPattern returns a hand-written matcher for a regex the supported models use, or nil.
func knownPattern(pattern string) matcher {
	if fastDisabled {
		return nil
	}
	return nil
}

// fastDisabled forces regexp2 for every pattern (tests compare the two).
var fastDisabled = false
