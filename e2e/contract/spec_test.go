package contract

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/paths"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"flashsale/pkg/openapi"
)

// The listeners, as the document's tags name them.
const (
	gatewayPublic  = "gateway-public"
	gatewayAdmin   = "gateway-admin"
	ordersvcPublic = "ordersvc-public"
	ordersvcAdmin  = "ordersvc-admin"
)

var listeners = []string{gatewayPublic, gatewayAdmin, ordersvcPublic, ordersvcAdmin}

// spec is the parsed document and its validator.
type spec struct {
	doc   *v3.Document
	valid validator.Validator
	opts  *config.ValidationOptions
}

func loadSpec(t testing.TB) *spec {
	t.Helper()
	d, err := libopenapi.NewDocument(openapi.Document)
	if err != nil {
		t.Fatalf("parse the document: %v", err)
	}
	if v := d.GetVersion(); !strings.HasPrefix(v, "3.1") {
		t.Fatalf("document version %q, want 3.1", v)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		t.Fatalf("build the document's model: %v", err)
	}
	opts := []config.Option{config.WithFormatAssertions(), config.WithContentAssertions()}
	v, errs := validator.NewValidator(d, opts...)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	return &spec{doc: &m.Model, valid: v, opts: config.NewValidationOptions(opts...)}
}

// operation is one method on one path template of the document.
type operation struct{ method, path string }

func (o operation) String() string { return o.method + " " + o.path }

// operations lists the document's operations with their tags and statuses.
func (s *spec) operations() map[operation]*v3.Operation {
	out := map[operation]*v3.Operation{}
	for p, item := range s.doc.Paths.PathItems.FromOldest() {
		for m, op := range item.GetOperations().FromOldest() {
			out[operation{strings.ToUpper(m), p}] = op
		}
	}
	return out
}

func statuses(op *v3.Operation) []int {
	var out []int
	for code := range op.Responses.Codes.KeysFromOldest() {
		n, err := strconv.Atoi(code)
		if err == nil {
			out = append(out, n)
		}
	}
	return out
}

// TestDocument: the document is valid OpenAPI 3.1, and every operation
// names the listeners that answer it, lists its answers without a
// default, and has a unique operationId.
func TestDocument(t *testing.T) {
	s := loadSpec(t)
	if ok, errs := s.valid.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("document: %s: %s (line %d)", e.Message, e.Reason, e.SpecLine)
		}
	}
	ids := map[string]operation{}
	for o, op := range s.operations() {
		if len(op.Tags) == 0 {
			t.Errorf("%s: no tag names its listener", o)
		}
		for _, tag := range op.Tags {
			if !slices.Contains(listeners, tag) {
				t.Errorf("%s: tag %q is not a listener", o, tag)
			}
		}
		if op.Responses == nil || op.Responses.Default != nil || len(statuses(op)) == 0 {
			t.Errorf("%s: want explicit statuses and no default answer", o)
		}
		if prev, dup := ids[op.OperationId]; dup || op.OperationId == "" {
			t.Errorf("%s: operationId %q missing or also on %s", o, op.OperationId, prev)
		}
		ids[op.OperationId] = o
	}
}

// recorder sends requests to the running services, checks each answer
// against the document, and remembers which operation, listener and
// status were seen, for the coverage check.
type recorder struct {
	t     *testing.T
	spec  *spec
	bases map[string]string // listener -> base URL
	http  *http.Client

	mu     sync.Mutex
	status map[operation]map[int]bool
	on     map[operation]map[string]bool
}

func newRecorder(t *testing.T, s *spec, bases map[string]string) *recorder {
	return &recorder{t: t, spec: s, bases: bases, http: &http.Client{
		// The document describes the answers themselves, redirects included.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, status: map[operation]map[int]bool{}, on: map[operation]map[string]bool{}}
}

// call is one request: its listener, method, path (with query), and what
// it carries.
type call struct {
	on, method, path string
	token            string            // bearer token, if any
	body             []byte            // JSON body, if any
	header           map[string]string // more headers
}

// do sends c and checks the answer: a documented operation of that
// listener, a documented status, a body and headers that conform.
func (r *recorder) do(c call) (int, []byte) {
	r.t.Helper()
	var body io.Reader = http.NoBody
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, r.bases[c.on]+c.path, body)
	if err != nil {
		r.t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s on %s: %v", c.method, c.path, c.on, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		r.t.Fatalf("%s %s on %s: read the answer: %v", c.method, c.path, c.on, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	r.check(c, req, resp, b)
	return resp.StatusCode, b
}

func (r *recorder) check(c call, req *http.Request, resp *http.Response, b []byte) {
	r.t.Helper()
	what := fmt.Sprintf("%s %s on %s answered %d %.300s", c.method, c.path, c.on, resp.StatusCode, b)
	item, _, tmpl := paths.FindPath(req, r.spec.doc, r.spec.opts)
	// A literal path wins over a template that would take an empty
	// segment ("/sale/" is not "/sale/{file}" with file "").
	if lit, ok := r.spec.doc.Paths.PathItems.Get(req.URL.Path); ok {
		item, tmpl = lit, req.URL.Path
	}
	if item == nil {
		r.t.Errorf("%s: the document has no such path", what)
		return
	}
	o := operation{c.method, tmpl}
	op, ok := item.GetOperations().Get(strings.ToLower(c.method))
	if !ok || op == nil {
		r.t.Errorf("%s: the document has no %s", what, o)
		return
	}
	if !slices.Contains(op.Tags, c.on) {
		r.t.Errorf("%s: %s is not tagged %s", what, o, c.on)
	}
	if !slices.Contains(statuses(op), resp.StatusCode) {
		r.t.Errorf("%s: status %d is not documented for %s", what, resp.StatusCode, o)
	} else if ok, errs := r.spec.valid.ValidateHttpResponse(req, resp); !ok {
		for _, e := range errs {
			r.t.Errorf("%s: %s: %s", what, e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				r.t.Errorf("    at %s (%s): %s", se.FieldPath, se.KeywordLocation, se.Reason)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status[o] == nil {
		r.status[o], r.on[o] = map[int]bool{}, map[string]bool{}
	}
	r.status[o][resp.StatusCode] = true
	r.on[o][c.on] = true
}

// want calls and fails unless the status is want.
func (r *recorder) want(want int, c call) []byte {
	r.t.Helper()
	got, b := r.do(c)
	if got != want {
		r.t.Fatalf("%s %s on %s: got %d %s, want %d", c.method, c.path, c.on, got, b, want)
	}
	return b
}

// coverage fails for every documented operation, listener and status the
// test did not see, except the exempted ones (each with its reason; an
// exemption of something undocumented, or seen after all, fails too).
func (r *recorder) coverage(exempt map[string]string) {
	r.t.Helper()
	var missing []string
	used := map[string]bool{}
	for o, op := range r.spec.operations() {
		for _, l := range op.Tags {
			if !r.on[o][l] {
				missing = append(missing, fmt.Sprintf("%s never called on %s", o, l))
			}
		}
		for _, code := range statuses(op) {
			k := fmt.Sprintf("%s %d", o, code)
			_, ex := exempt[k]
			used[k] = ex
			switch {
			case r.status[o][code] && ex:
				r.t.Errorf("%s: exempted (%s) but seen: drop the exemption", k, exempt[k])
			case !r.status[o][code] && !ex:
				missing = append(missing, k+" never answered")
			}
		}
	}
	for k := range exempt {
		if _, ok := used[k]; !ok {
			r.t.Errorf("exemption %q names no documented status", k)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		r.t.Errorf("coverage: %s", m)
	}
}
