// Package workspace holds the test that keeps the workspace's one list of
// modules (go.work's use block) in agreement with its readers: the
// Makefile, which reads it, and README.md's module table, which a person
// reads. It has no code of its own.
package workspace
