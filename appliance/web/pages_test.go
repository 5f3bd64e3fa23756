package web

import (
	"crypto/tls"
	"net/http/httptest"
	"strings"
	"testing"
)

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

// The session cookie is Secure when the browser came over TLS: to the
// box itself, or (the usual way) to a TLS reverse proxy in front of it,
// which says so in X-Forwarded-Proto or Forwarded.
func TestSessionCookie_Secure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header map[string]string
		tls    bool
		want   bool
	}{
		{"plain HTTP", nil, false, false},
		{"TLS to the box", nil, true, true},
		{"X-Forwarded-Proto https", map[string]string{"X-Forwarded-Proto": "HTTPS"}, false, true},
		{"X-Forwarded-Proto http", map[string]string{"X-Forwarded-Proto": "http"}, false, false},
		{"Forwarded proto=https", map[string]string{"Forwarded": `for=192.0.2.60;proto=https;by=203.0.113.43`}, false, true},
		{"Forwarded quoted", map[string]string{"Forwarded": `for="[2001:db8::1]";proto="https"`}, false, true},
		{"Forwarded proto=http", map[string]string{"Forwarded": "for=192.0.2.60;proto=http"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/login", nil)
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			(&Handler{}).setSession(w, r, "tok")
			set := w.Header().Get("Set-Cookie")
			if got := strings.Contains(set, "; Secure"); got != tc.want || !strings.Contains(set, "HttpOnly") {
				t.Errorf("Set-Cookie = %q, want Secure %v", set, tc.want)
			}
			w = httptest.NewRecorder()
			if err := (&Handler{}).logout(w, r, nil); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(w.Header().Get("Set-Cookie"), "; Secure"); got != tc.want {
				t.Errorf("logout's Set-Cookie = %q, want Secure %v", w.Header().Get("Set-Cookie"), tc.want)
			}
		})
	}
}
