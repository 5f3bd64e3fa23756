package appliance

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromium finds a headless-capable Chromium, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on PATH: `make test` installs Debian's chromium (packaging/setup.sh --browser)")
	return ""
}

// TestWeb_Browser drives the pages in a real headless Chromium, as a
// contestant at a hackathon would: sign in, open a problem, submit the
// bundled solution in leaderboard mode, watch the page's script follow
// the run to its end (the page itself never reloads), read the result
// with its plot, see the leaderboard. No page asks for anything but the
// box. With KERNELBOX_SCREENSHOTS=DIR it saves each page there as PNG
// (docs/screenshots holds the last ones looked at).
func TestWeb_Browser(t *testing.T) {
	exe := chromium(t)
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // the tests run as root, where Chromium's own sandbox will not start
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
		// No connection of Chromium's own to the outside: the machine has
		// no network, and the test checks that pages make no such request.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var requests []string
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("network events: %v", err)
	}
	shots := os.Getenv("KERNELBOX_SCREENSHOTS")
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil || shots == "" {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	text := func(sel string, into *string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) (err error) {
			*into, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
			return err
		})
	}
	eval := func(js string, into *string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) (err error) {
			*into, err = chromedp.Run(ctx, chromedp.Evaluate[string](js))
			return err
		})
	}
	sol, err := os.ReadFile(filepath.Join("testdata", "quick", "solutions", "correct", "double.py"))
	if err != nil {
		t.Fatal(err)
	}

	var status, marker, board, problem, set, display, area, sent string
	err = chromedp.Do(ctx,
		chromedp.Navigate(td.server+"/problems/quick"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		shot("login"),
		chromedp.SendKeys(chromedp.CSS(`#token`), td.token),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button`)),
		// The editor (CodeMirror, bundled into the binary) replaces the
		// text area; its styles need the page's CSP nonce.
		chromedp.WaitVisible(chromedp.CSS(`.cm-editor`)),
		text(`article.description`, &problem),
		eval(`getComputedStyle(document.querySelector(".cm-editor")).display`, &display),
		eval(`(() => { const a = document.getElementById("code"); a.value = `+jsString(string(sol))+`;
			a.dispatchEvent(new Event("input")); return "set"; })()`, &set),
		chromedp.SendKeys(chromedp.CSS(`.cm-content`), "# typed in the editor\n"),
		eval(`document.getElementById("code").value`, &area),
		chromedp.SetValue(chromedp.CSS(`#mode`), "leaderboard"),
		shot("problem"),
		chromedp.Click(chromedp.CSS(`form.submit button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#live`)),
		// A mark on this page's window: a reload would wipe it.
		eval(`window.kbMark = "same page"`, &set),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-ended="true"]`)),
		text(`#status`, &status),
		eval(`String(window.kbMark)`, &marker),
		chromedp.WaitVisible(chromedp.CSS(`svg.plot`)),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) (err error) {
			sent, err = chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(`details.code`)))
			return err
		}),
		shot("submission"),
		chromedp.Navigate(td.server+"/leaderboards/quick"),
		text(`table.ranking`, &board),
		shot("leaderboard"),
		chromedp.Navigate(td.server+"/"),
		shot("overview"),
		chromedp.Navigate(td.server+"/live"),
		shot("live"),
		chromedp.Navigate(td.server+"/queue"),
		shot("queue"),
		chromedp.Navigate(td.server+"/me"),
		shot("mine"),
		chromedp.Navigate(td.server+"/admin"),
		shot("admin"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if !strings.Contains(problem, "Double every element") {
		t.Errorf("problem description = %q", problem)
	}
	if display != "flex" {
		t.Errorf("the editor's display = %q, want CodeMirror's flex: its styles did not apply (CSP nonce?)", display)
	}
	if !strings.Contains(area, "# typed in the editor") || !strings.Contains(area, "def custom_kernel") {
		t.Errorf("the form's field after typing in the editor = %q", area)
	}
	if !strings.Contains(sent, "# typed in the editor") {
		t.Errorf("the submitted code = %q, want what was typed in the editor", sent)
	}
	if status != "passed" {
		t.Errorf("the submission's status = %q, want passed", status)
	}
	if marker != "same page" {
		t.Errorf("the page reloaded while the run went on (mark %q): the script should follow it in place", marker)
	}
	if !strings.Contains(board, "admin") {
		t.Errorf("leaderboard = %q, want admin's entry", board)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requests) < 10 {
		t.Errorf("only %d requests seen: the network listener is not working", len(requests))
	}
	for _, u := range requests {
		if !strings.HasPrefix(u, td.server+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("a page asked for %s, outside the box", u)
		}
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
