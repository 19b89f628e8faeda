// Package browser drives Debian's headless Chromium through chromedriver
// (the W3C WebDriver protocol over HTTP, a handful of calls) so the tests
// in this module can use the sale page and the dashboard as a person does.
// Nothing is downloaded: the browser and the driver are the system's
// packages (apt-get install chromium chromium-driver).
package browser

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// Paths of the system packages; FLASHSALE_CHROMIUM and
// FLASHSALE_CHROMEDRIVER override them.
const (
	DefaultChromium     = "/usr/bin/chromium"
	DefaultChromedriver = "/usr/bin/chromedriver"
)

// ErrNoBrowser means Chromium or chromedriver is not installed.
var ErrNoBrowser = errors.New("chromium or chromedriver not installed (apt-get install -y chromium chromium-driver)")

// Driver is a running chromedriver.
type Driver struct {
	url string
	cmd *exec.Cmd
}

// Find locates the browser and the driver, or returns ErrNoBrowser.
func Find(getenv func(string) string) (chromium, chromedriver string, err error) {
	chromium, chromedriver = DefaultChromium, DefaultChromedriver
	if v := getenv("FLASHSALE_CHROMIUM"); v != "" {
		chromium = v
	}
	if v := getenv("FLASHSALE_CHROMEDRIVER"); v != "" {
		chromedriver = v
	}
	for _, p := range []string{chromium, chromedriver} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("%w: %s missing", ErrNoBrowser, p)
		}
	}
	return chromium, chromedriver, nil
}

// StartDriver runs chromedriver on a free local port until Stop.
func StartDriver(ctx context.Context, chromedriver string, log io.Writer) (*Driver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(chromedriver, "--port="+strconv.Itoa(port), "--allowed-ips=127.0.0.1")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start chromedriver: %w", err)
	}
	d := &Driver{url: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st struct {
			Value struct {
				Ready bool `json:"ready"`
			} `json:"value"`
		}
		if err := d.call(ctx, "GET", "/status", nil, &st); err == nil && st.Value.Ready {
			return d, nil
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, errors.New("chromedriver did not become ready in 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop ends chromedriver.
func (d *Driver) Stop() {
	if d.cmd.Process != nil {
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
	}
}

// Session is one browser window.
type Session struct {
	d  *Driver
	id string
}

// Flags keep Chromium quiet and self-contained: headless, no sandbox (tests
// run as root in containers), no network of its own, a fresh profile.
func Flags(userDataDir string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage",
		"--window-size=1280,1000", "--user-data-dir=" + userDataDir}
}

// NewSession opens a browser with a fresh profile in userDataDir.
func (d *Driver) NewSession(ctx context.Context, chromium, userDataDir string) (*Session, error) {
	req := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName":        "chrome",
		"pageLoadStrategy":   "normal",
		"goog:chromeOptions": map[string]any{"binary": chromium, "args": Flags(userDataDir)},
	}}}
	var resp struct {
		Value struct {
			SessionID string `json:"sessionId"`
		} `json:"value"`
	}
	if err := d.call(ctx, "POST", "/session", req, &resp); err != nil {
		return nil, fmt.Errorf("new session: %w", err)
	}
	return &Session{d: d, id: resp.Value.SessionID}, nil
}

// Close ends the session and its browser.
func (s *Session) Close(ctx context.Context) error {
	return s.d.call(ctx, "DELETE", "/session/"+s.id, nil, nil)
}

// Navigate loads url and waits for the document to load.
func (s *Session) Navigate(ctx context.Context, url string) error {
	return s.d.call(ctx, "POST", "/session/"+s.id+"/url", map[string]any{"url": url}, nil)
}

// Exec runs a script (a function body; arguments as `arguments[i]`) and
// decodes its return value into out (nil to ignore it).
func (s *Session) Exec(ctx context.Context, script string, out any, args ...any) error {
	if args == nil {
		args = []any{}
	}
	var resp struct {
		Value json.RawMessage `json:"value"`
	}
	if err := s.d.call(ctx, "POST", "/session/"+s.id+"/execute/sync", map[string]any{"script": script, "args": args}, &resp); err != nil {
		return fmt.Errorf("execute script: %w", err)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(resp.Value, out)
}

// elementKey is the W3C name of an element reference.
const elementKey = "element-6066-11e4-a52e-4f735466cecf"

// Click finds the first element matching css and clicks it as a user
// would (the driver refuses a disabled or hidden element's click silently,
// so the test checks the result, not the call).
func (s *Session) Click(ctx context.Context, css string) error {
	var found struct {
		Value map[string]string `json:"value"`
	}
	if err := s.d.call(ctx, "POST", "/session/"+s.id+"/element", map[string]any{"using": "css selector", "value": css}, &found); err != nil {
		return fmt.Errorf("find %s: %w", css, err)
	}
	if err := s.d.call(ctx, "POST", "/session/"+s.id+"/element/"+found.Value[elementKey]+"/click", map[string]any{}, nil); err != nil {
		return fmt.Errorf("click %s: %w", css, err)
	}
	return nil
}

// Screenshot returns the window as PNG.
func (s *Session) Screenshot(ctx context.Context) ([]byte, error) {
	var resp struct {
		Value string `json:"value"`
	}
	if err := s.d.call(ctx, "GET", "/session/"+s.id+"/screenshot", nil, &resp); err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	return base64.StdEncoding.DecodeString(resp.Value)
}

// Wait evaluates a boolean expression every 50 ms until it is true or the
// timeout passes; the error then says which expression and what the
// describe expression showed last.
func (s *Session) Wait(ctx context.Context, timeout time.Duration, expr, describe string) error {
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		err := s.Exec(ctx, "return !!("+expr+");", &ok)
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var seen any
			_ = s.Exec(ctx, "return "+describe+";", &seen)
			return fmt.Errorf("waited %v for %s (last error %v); page shows %v", timeout, expr, err, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call sends one WebDriver command; a W3C error value becomes an error.
func (d *Driver) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Value struct {
				Error   string `json:"error"`
				Message string `json:"message"`
			} `json:"value"`
		}
		_ = json.Unmarshal(b, &e)
		return fmt.Errorf("webdriver %s %s: %d %s: %.300s", method, path, resp.StatusCode, e.Value.Error, e.Value.Message)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
