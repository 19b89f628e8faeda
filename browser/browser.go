// Package browser drives Debian's headless Chromium through the DevTools
// protocol (github.com/chromedp/chromedp; no chromedriver) so the tests in
// this module can use the sale page and the dashboard as a person does,
// and fail on any JavaScript exception or console error in the page.
// Nothing is downloaded: the browser is the system's package (apt-get
// install chromium).
package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// DefaultChromium is the system package's browser; FLASHSALE_CHROMIUM
// overrides it.
const DefaultChromium = "/usr/bin/chromium"

// ErrNoBrowser means Chromium is not installed.
var ErrNoBrowser = errors.New("chromium not installed (apt-get install -y chromium)")

// Find locates the browser, or returns ErrNoBrowser.
func Find(getenv func(string) string) (string, error) {
	chromium := DefaultChromium
	if v := getenv("FLASHSALE_CHROMIUM"); v != "" {
		chromium = v
	}
	if _, err := os.Stat(chromium); err != nil {
		return "", fmt.Errorf("%w: %s missing", ErrNoBrowser, chromium)
	}
	return chromium, nil
}

// Browser is one headless Chromium with one tab, and the errors its pages
// raised.
type Browser struct {
	ctx    context.Context // chromedp's: the tab
	cancel context.CancelFunc

	mu     sync.Mutex
	errors []string
}

// options keep Chromium quiet and self-contained: headless, no network of
// its own, a fresh profile in userDataDir, and no sandbox when running as
// root (containers), where Chromium refuses to start with one.
func options(chromium, userDataDir string) []chromedp.ExecAllocatorOption {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(userDataDir),
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-component-update", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	return opts
}

// Open starts Chromium (it picks its own DevTools port and tells chromedp,
// so no port is chosen and released here) with one tab, recording every
// uncaught exception and console.error of its pages, until Close or ctx
// ends.
func Open(ctx context.Context, chromium, userDataDir string) (*Browser, error) {
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, options(chromium, userDataDir)...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	b := &Browser{ctx: tabCtx, cancel: func() { cancelTab(); cancelAlloc() }}
	// Listen starts the browser and attaches to the tab (its Runtime
	// domain enabled), then sees every event of the tab's pages in order.
	if err := chromedp.Listen(tabCtx, b.record); err != nil {
		b.cancel()
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	return b, nil
}

// record keeps the page errors among the tab's events.
func (b *Browser) record(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = "uncaught exception: " + describeException(ev.ExceptionDetails)
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var parts []string
		for _, a := range ev.Args {
			parts = append(parts, remoteText(a))
		}
		msg = "console.error: " + strings.Join(parts, " ")
	default:
		return
	}
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

func describeException(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "(no details)"
	}
	text := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		text += " " + d.Exception.Description
	}
	return fmt.Sprintf("%s (%s:%d:%d)", text, d.URL, d.LineNumber+1, d.ColumnNumber+1)
}

func remoteText(o *runtime.RemoteObject) string {
	var str string
	switch {
	case o == nil:
		return ""
	case o.Type == runtime.RemoteObjectTypeString && json.Unmarshal(o.Value, &str) == nil:
		return str
	case o.Description != "":
		return o.Description
	case len(o.Value) > 0:
		return string(o.Value)
	}
	return string(o.Type)
}

// Errors returns the JavaScript exceptions and console errors the pages
// raised so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// Close ends the browser.
func (b *Browser) Close() { b.cancel() }

// tab is the tab's context bounded by ctx as well as the browser's life.
func (b *Browser) tab(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(b.ctx)
	stop := context.AfterFunc(ctx, cancel)
	return c, func() { stop(); cancel() }
}

// do runs steps in the tab.
func (b *Browser) do(ctx context.Context, steps ...chromedp.Action[chromedp.Void]) error {
	c, cancel := b.tab(ctx)
	defer cancel()
	return chromedp.Do(c, steps...)
}

// Navigate loads url and waits for the document to load.
func (b *Browser) Navigate(ctx context.Context, url string) error {
	if err := b.do(ctx, chromedp.Navigate(url)); err != nil {
		return fmt.Errorf("navigate to %s: %w", url, err)
	}
	return nil
}

// Exec runs a script as a function body (so it may `return` a value) and
// decodes its result into out (nil to ignore it).
func (b *Browser) Exec(ctx context.Context, script string, out any) error {
	c, cancel := b.tab(ctx)
	defer cancel()
	res, err := chromedp.Run(c, chromedp.Evaluate[[]byte]("(function(){"+script+"\n})()"))
	if err != nil {
		return fmt.Errorf("execute script: %w", err)
	}
	if out == nil || len(res) == 0 { // a script without return gives undefined
		return nil
	}
	return json.Unmarshal(res, out)
}

// Click clicks the first element matching css as a user would, once it is
// visible (the test checks the result, not the call: a disabled button
// takes the click and does nothing).
func (b *Browser) Click(ctx context.Context, css string) error {
	if err := b.do(ctx, chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible)); err != nil {
		return fmt.Errorf("click %s: %w", css, err)
	}
	return nil
}

// Screenshot returns the window as PNG.
func (b *Browser) Screenshot(ctx context.Context) ([]byte, error) {
	c, cancel := b.tab(ctx)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.CaptureScreenshot())
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	return png, nil
}

// Wait evaluates a boolean expression every 50 ms until it is true or the
// timeout passes; the error then says which expression and what the
// describe expression showed last.
func (b *Browser) Wait(ctx context.Context, timeout time.Duration, expr, describe string) error {
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		err := b.Exec(ctx, "return !!("+expr+");", &ok)
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var seen any
			_ = b.Exec(ctx, "return "+describe+";", &seen)
			return fmt.Errorf("waited %v for %s (last error %v); page shows %v", timeout, expr, err, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
