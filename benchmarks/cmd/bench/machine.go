package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// describeMachine names the CPU and the core count for the table.
func describeMachine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	s := fmt.Sprintf("%d cores", runtime.NumCPU())
	if model != "" {
		s += " (" + model + ")"
	}
	return s + ", loopback, generator on the same machine"
}
