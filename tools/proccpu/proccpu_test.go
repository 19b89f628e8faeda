package proccpu

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The sampler counts only processes working inside the checkout, so a
// second checkout's stack on the same machine does not enter the figures.
func TestSampleCPUScopesToTheCheckout(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := Root()
	if root == "" || !inside(root, self) {
		t.Fatalf("Root() = %q: the test runs inside the checkout (%s), so it must be found and hold this process", root, wd)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy", "stack.env")); err != nil {
		t.Fatalf("Root() = %q holds no deploy/stack.env: %v", root, err)
	}
	if inside(root+"-elsewhere", self) {
		t.Fatalf("a directory that only shares the checkout's prefix (%s-elsewhere) counted this process", root)
	}
	if !inside("", self) {
		t.Fatal(`root "" must count every process`)
	}
}
