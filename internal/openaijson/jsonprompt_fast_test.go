package openaijson

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-llm/switchyard/internal/apicore"
)

// TestFastIDsAgreeWithTheGeneralPath: prompts read with fastID give the same ids,
// or the same error, as the byte-at-a-time path, whatever the reads' sizes.
func TestFastIDsAgreeWithTheGeneralPath(t *testing.T) {
	prompts := []string{
		`[1,2,3]`, `[ 1 , 2 ,3 ]`, "[\n1,\t2\r\n]", `[0]`, `[0,10,100]`, `[]`, `[1,]`, `[01]`, `[-1]`,
		`[1.5]`, `[1e3]`, `[123456789012345678]`, `[1234567890123456789]`, `[99999999999999999999]`,
		`[1,"a"]`, `[[1,2],[3]]`, `[[1, 2], [ 3 ]]`, `[1 2]`, `[1,2`, `[1,2,3,4,5,6,7,8,9]`, `[[]]`,
		`[1}`, `[true]`, `[null]`, `[1,-0]`,
	}
	var long strings.Builder
	long.WriteString("[")
	for i := range 3000 {
		if i > 0 {
			long.WriteString(", ")
		}
		fmt.Fprint(&long, i*7919%151936)
	}
	long.WriteString("]")
	prompts = append(prompts, long.String())
	wraps := map[string]func(io.Reader) io.Reader{
		"whole": func(r io.Reader) io.Reader { return r },
		"half":  iotest.HalfReader,
		"byte":  iotest.OneByteReader,
	}
	for _, pr := range prompts {
		for _, maxTokens := range []int{apicore.MaxPromptTokens, 2} {
			body := `{"prompt": ` + pr + `, "max_tokens": 4}`
			read := func(slow bool, wrap func(io.Reader) io.Reader) (string, [][]int64) {
				slowIDsOnly = slow
				defer func() { slowIDsOnly = false }()
				var b testBody
				pr := Prompt{MaxTokens: maxTokens}
				if err := testDecoder.Decode(wrap(strings.NewReader(body)), b.field, &pr); err != nil {
					return err.Error(), nil
				}
				return "", pr.IDs
			}
			wantErr, want := read(true, wraps["whole"])
			for name, w := range wraps {
				gotErr, got := read(false, w)
				if gotErr != wantErr || !cmp.Equal(got, want) {
					t.Errorf("%.60s (max %d, %s reads): got %q %v, want %q %v", pr, maxTokens, name, gotErr, got, wantErr, want)
				}
			}
		}
	}
}
