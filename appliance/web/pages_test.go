package web

import "testing"

// TestSafeNext: a redirect after sign-in stays on this box, whatever a
// link's next= holds.
func TestSafeNext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/problems/vectoradd":    "/problems/vectoradd",
		"/submissions/3?part=x":  "/submissions/3?part=x",
		"":                       "/",
		"https://evil.example/":  "/",
		"//evil.example":         "/",
		"/\\evil.example":        "/",
		"/\t/evil.example":       "/",
		"/\n/evil.example":       "/",
		"/%0a":                   "/%0a",
		"/a\x7f":                 "/",
		"javascript:alert(1)":    "/",
		"/ok/../still-this-host": "/ok/../still-this-host",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
