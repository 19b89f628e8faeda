// Package workspace holds the tests that keep the workspace's one list of
// modules (go.work's use block) in agreement with its readers: the
// Makefile, which reads it, and README.md's module table, which a person
// reads; and that every module replaces the workspace modules it requires
// with their folders, so GOWORK=off builds work. It has no code of its own.
package workspace
