package problems

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTestProgress(t *testing.T) {
	t.Parallel()
	stream := "test-count: 3\ntest.0.spec: n: 1\ntest.0.status: pass\ntest.1.spec: n: 2\\nx\ntest.1.status: fail\n" +
		"test.1.error: boom\ngarbage line\ntest.2.spec: n: 3\r\ntest.2.status: pass\r\ncheck: fail\n"
	// Every way of cutting the stream into writes gives the same reports.
	for _, chunk := range []int{1, 2, 7, 64, len(stream)} {
		var got []TestResult
		p := newTestProgress(1<<20, func(r TestResult) { got = append(got, r) })
		for i := 0; i < len(stream); i += chunk {
			if n, err := p.Write([]byte(stream[i:min(i+chunk, len(stream))])); err != nil || n != min(chunk, len(stream)-i) {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		// As ParseResult reads them, less what comes after the status line.
		res, err := ParseResult(strings.NewReader(strings.ReplaceAll(stream, "garbage line\n", "")))
		if err != nil {
			t.Fatal(err)
		}
		want := res.Tests
		want[1].Error = ""
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("chunks of %d (-want +got):\n%s", chunk, diff)
		}
	}
}

func TestTestProgress_Bounds(t *testing.T) {
	t.Parallel()
	var flood strings.Builder
	for i := range 2 * maxProgressTests {
		fmt.Fprintf(&flood, "test.%d.status: pass\n", i)
	}
	n := 0
	p := newTestProgress(1<<30, func(TestResult) { n++ })
	_, _ = p.Write([]byte(flood.String()))
	if n != maxProgressTests {
		t.Errorf("a flood of %d tests gave %d reports, want the cap %d", 2*maxProgressTests, n, maxProgressTests)
	}
	n = 0
	p = newTestProgress(25, func(TestResult) { n++ }) // the first line and a half
	_, _ = p.Write([]byte("test.0.status: pass\ntest.1.status: pass\n"))
	if n != 1 {
		t.Errorf("a 25-byte budget gave %d reports, want 1", n)
	}
}
