// Package faults proves the flash sale's promises under faults: it stops,
// restarts, kills, stalls and degrades the real servers of the local stack
// (deploy/stack/, through tools/stackctl) and the real gateway and order service binaries
// (tools/harness) in the middle of a sale, watches what shoppers are told,
// and ends every scenario with the invariant audit of tools/audit.
//
// The tests stop servers every other module's tests depend on, so they run
// alone: `make faults` runs this module by itself, after the others, one
// test at a time (-p 1, no t.Parallel). Every test restores what it broke in
// t.Cleanup and waits until the server answers again. `go test -v` prints
// the reliability table (RELIABILITY.md) at the end of the run.
package faults
