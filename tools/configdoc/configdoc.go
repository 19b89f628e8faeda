// Package configdoc checks the README's configuration table against what a
// binary's configuration loader reads, so that the operators' reference
// cannot drift from the code again (it did: FLASHSALE_JWT_ISSUER and five
// more were read but not listed). Tooling: only tests import it.
package configdoc

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"flashsale/pkg/config"
)

// Section is the README heading whose table lists the variables.
const Section = "## Configuration"

var varName = regexp.MustCompile(`FLASHSALE_[A-Z0-9_]+`)

// Documented returns the variables the README's configuration table lists
// for binary: rows whose third column ("who") is binary or "both". Every
// name in a row's first column counts, written out in full.
func Documented(readme []byte, binary string) (map[string]bool, error) {
	out := map[string]bool{}
	in, rows := false, 0
	sc := bufio.NewScanner(bytes.NewReader(readme))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == Section
			continue
		case !in || !strings.HasPrefix(line, "|"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			return nil, fmt.Errorf("configuration table row %q: want variable | default | who | meaning", line)
		}
		who := strings.TrimSpace(cells[2])
		if who == "who" || strings.HasPrefix(who, "---") {
			continue // the header and its rule
		}
		rows++
		if who != binary && who != "both" {
			continue
		}
		for _, n := range varName.FindAllString(cells[0], -1) {
			out[n] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if rows == 0 {
		return nil, fmt.Errorf("no table under %q", Section)
	}
	return out, nil
}

// Recorder returns an empty environment that notes every FLASHSALE_* name
// it is asked, and a function returning those names. A secret's NAME_FILE
// is left out when NAME was asked: the README states the rule once for
// every secret.
func Recorder() (env config.Env, asked func() map[string]bool) {
	r := &recorder{seen: map[string]bool{}}
	asked = func() map[string]bool {
		out := map[string]bool{}
		for k := range r.seen {
			if base, ok := strings.CutSuffix(k, "_FILE"); ok && r.seen[base] {
				continue
			}
			out[k] = true
		}
		return out
	}
	return r, asked
}

type recorder struct{ seen map[string]bool }

func (r *recorder) Lookup(k string) (string, bool) {
	if strings.HasPrefix(k, "FLASHSALE_") {
		r.seen[k] = true
	}
	return "", false
}

func (r *recorder) Names() []string { return nil }

// Diff lists the variables read but not documented (missing) and the
// documented ones nothing reads (extra), sorted.
func Diff(documented, read map[string]bool) (missing, extra []string) {
	for k := range read {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !read[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra
}
