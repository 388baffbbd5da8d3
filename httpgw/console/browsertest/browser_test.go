// Package browsertest drives the web console in a real browser: Debian's
// Chromium, headless, through the DevTools protocol (chromedp), against a
// real broker (Pebble store, real clock) behind the real gateway on a
// loopback socket.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/httpgw"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// waitLimit bounds every wait for the page: a condition, never a fixed
// time, with a deadline generous enough for a loaded CI machine.
const waitLimit = 90 * time.Second

// chromiumPath finds Debian's chromium (make browserdeps installs it).
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on this machine: `make browserdeps` installs Debian's (CI runs it before the Go tests)")
	return ""
}

// artifactsDir is where the screenshots go: $OMNIBUS_ARTIFACTS, or a
// directory under the system's temporary directory; never the repository.
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("OMNIBUS_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "omnibus-artifacts")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, "failure.png")) // an earlier run's
	return dir
}

// env is a broker and gateway serving the console on a loopback port.
type env struct {
	broker *core.Broker
	url    string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := core.New(core.Config{Store: st, Logger: zaptest.NewLogger(t), Stats: true})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := httpgw.New(httpgw.Config{Broker: b, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(gw.Handler())
	srv.Config = gw.Server("")
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		b.Close()
		st.Close()
	})
	return &env{broker: b, url: srv.URL}
}

// browser starts a headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	// The page's console errors and uncaught exceptions go to the test log.
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf), chromedp.WithListener(func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			t.Logf("page exception: %s %s", e.ExceptionDetails.Text, exceptionText(e.ExceptionDetails))
		case *runtime.EventConsoleAPICalled:
			if e.Type == "error" || e.Type == "warning" {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				t.Logf("page console %s: %s", e.Type, strings.Join(parts, " "))
			}
		}
	}))
	t.Cleanup(bcancel)
	return bctx
}

// page wraps the browser with the test's steps.
type page struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// eval runs a JavaScript expression and decodes its value into out.
func (p *page) eval(expr string, out any) {
	p.t.Helper()
	raw, err := chromedp.Run(p.ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		p.t.Fatalf("evaluate %s: %v (%s)", expr, err, raw)
	}
}

// waitFor waits until the JavaScript condition holds; on the deadline it
// fails with what the page shows.
func (p *page) waitFor(what, cond string) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(waitLimit)))
	if err != nil {
		var text string
		p.eval(`document.getElementById('main').innerText.slice(0, 2000) + '\n[toasts] ' + document.getElementById('toasts').innerText`, &text)
		if png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(filepath.Join(p.shots, "failure.png"), png, 0o644)
		}
		p.t.Fatalf("waiting for %s: %v\npage shows (screenshot: %s):\n%s", what, err, filepath.Join(p.shots, "failure.png"), text)
	}
}

// waitText waits until the element sel holds text.
func (p *page) waitText(sel, text string) {
	p.t.Helper()
	p.waitFor(fmt.Sprintf("%q in %s", text, sel),
		fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, text))
}

// click clicks the first element matching sel once it is there.
func (p *page) click(sel string) {
	p.t.Helper()
	p.waitFor(sel, fmt.Sprintf(`!!document.querySelector(%q) && !document.querySelector(%q).disabled`, sel, sel))
	var ok bool
	p.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.scrollIntoView({block: 'center'}); e.click(); return true; })()`, sel), &ok)
}

// clickText clicks the first link or button whose text is text.
func (p *page) clickText(text string) {
	p.t.Helper()
	find := fmt.Sprintf(`[...document.querySelectorAll('a,button')].find(e => e.textContent.trim() === %q && !e.disabled)`, text)
	p.waitFor("a button "+text, "!!"+find)
	var ok bool
	p.eval("("+find+").click(), true", &ok)
}

// fill sets an input's value as typing would (input events fire).
func (p *page) fill(sel, value string) {
	p.t.Helper()
	p.waitFor(sel, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	var ok bool
	p.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.focus(); e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, sel, value), &ok)
}

// shot writes a screenshot of the whole page, without the notices of
// earlier steps.
func (p *page) shot(name string) {
	p.t.Helper()
	var ok bool
	p.eval(`document.querySelectorAll('.toast').forEach(t => t.remove()), true`, &ok)
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(p.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
}

// counts reads an entity's counts from the broker itself.
func counts(t *testing.T, b *core.Broker, path string) core.Counts {
	t.Helper()
	c, err := b.Counts(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// hashIs waits until the page's location hash is h.
func (p *page) hashIs(h string) {
	p.t.Helper()
	p.waitFor("location "+h, fmt.Sprintf(`location.hash === %q`, h))
}

// open shows the view at hash, as following a link would.
func (p *page) open(hash string) {
	p.t.Helper()
	var ok bool
	p.eval(fmt.Sprintf(`location.hash = %q, true`, hash), &ok)
}

// exceptionText is the description of an uncaught exception's value.
func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil || d.Exception == nil {
		return ""
	}
	return d.Exception.Description
}
