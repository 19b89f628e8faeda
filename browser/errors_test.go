package browser

import (
	"net/http"
	"net/http/httptest"
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
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.path, "/"), func(t *testing.T) {
			chromium, err := Find(func(string) string { return "" })
			if err != nil {
				t.Skipf("browser tests skipped: %v", err)
			}
			ctx := testenv.Context(t)
			b, err := Open(ctx, chromium, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := b.Navigate(ctx, srv.URL+tt.path); err != nil {
				t.Fatal(err)
			}
			// The page's errors arrive as events, after its load: give
			// the timer and the microtask their turn, then a round trip.
			if err := b.Wait(ctx, 5*time.Second, `document.readyState === "complete"`, `document.readyState`); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for tt.want != "" && len(b.Errors()) == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if tt.want == "" {
				time.Sleep(300 * time.Millisecond) // a late error would show here
			}
			got := b.Errors()
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("clean page: errors %q", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("errors %q, want one containing %q", got, tt.want)
			}
		})
	}
}
