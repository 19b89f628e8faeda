package browser

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"flashsale/tools/testenv"
)

// The check every browser test ends with works: a page that throws, logs
// a console error or leaves a promise rejected is caught, each by its
// message, and a clean page raises nothing.
func TestPageErrorsAreCaught(t *testing.T) {
	pages := map[string]string{
		"/clean":   `<p id="p">fine</p><script>console.log("all good"); console.warn("a warning is not an error")</script>`,
		"/throws":  `<script>setTimeout(() => { throw new Error("deliberate uncaught") }, 0)</script>`,
		"/console": `<script>console.error("deliberate console error", 42)</script>`,
		"/rejects": `<script>Promise.reject(new Error("deliberate rejection"))</script>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>t</title>" + page))
	}))
	defer srv.Close()
	tests := []struct {
		path string
		want string // in the one error caught; "" for none
	}{
		{"/clean", ""},
		{"/throws", "deliberate uncaught"},
		{"/console", "console.error: deliberate console error 42"},
		{"/rejects", "deliberate rejection"},
	}
	chromium, err := Find(os.Getenv)
	if errors.Is(err, ErrNoBrowser) {
		t.Skipf("browser tests skipped: %v", err)
	}
	ctx := testenv.Context(t)
	// One browser for every page: each case looks at the errors raised
	// since it navigated.
	b, err := Open(ctx, chromium, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.path, "/"), func(t *testing.T) {
			before := len(b.Errors())
			if err := b.Navigate(ctx, srv.URL+tt.path); err != nil {
				t.Fatal(err)
			}
			// The page's errors arrive as events after its load; the
			// timer and the rejected promise take their turn first.
			deadline := time.Now().Add(5 * time.Second)
			for tt.want != "" && len(b.Errors()) == before && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if tt.want == "" {
				time.Sleep(300 * time.Millisecond) // a late error would show here
			}
			got := b.Errors()[before:]
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("clean page: errors %q", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("errors %q, want one containing %q", got, tt.want)
			}
		})
	}
}
