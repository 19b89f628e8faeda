// Package proccpu reads from /proc the CPU time each process of the local
// stack has used (gateway, Kafka, ordersvc, Redis, PostgreSQL, the load
// generator), so a load test can say what selling cost per order. The load
// generator and the benchmark driver both report it.
package proccpu

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// components are the processes of the stack whose CPU a capacity engineer
// sizes, named by how their command line reads.
var components = []struct {
	name  string
	match func(exe string, cmdline []byte) bool
}{
	{"gateway", func(exe string, _ []byte) bool { return exe == "gateway" }},
	{"kafka", func(_ string, cmd []byte) bool { return bytes.Contains(cmd, []byte("kafka.Kafka")) }},
	{"ordersvc", func(exe string, _ []byte) bool { return exe == "ordersvc" }},
	// redis-server and PostgreSQL's backends rewrite their argv
	// ("redis-server 127.0.0.1:16379", "postgres: flashsale ... idle").
	{"redis", func(exe string, _ []byte) bool { return strings.HasPrefix(exe, "redis-server") }},
	{"postgres", func(exe string, _ []byte) bool { return strings.HasPrefix(exe, "postgres") }},
	{"loadtest", func(exe string, _ []byte) bool { return exe == "loadtest" }},
}

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ, 100
// on every Linux architecture Go supports.
const userHZ = 100

// Snapshot is the CPU time each process of the stack has used so far, by
// pid, with its component.
type Snapshot map[int]procTime

type procTime struct {
	component string
	cpu       time.Duration
}

// Root is the checkout whose stack the run measures: the nearest
// directory above the working directory that holds deploy/stack.env, or ""
// when there is none (a stack run some other way: every matching process
// counts). Each server the local stack starts works inside the checkout
// (PostgreSQL in .stack/postgres/data, Redis in .stack/redis, the JVMs and
// the services in the checkout itself), so a second checkout's stack on the
// same machine is told apart by its processes' working directories.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "deploy", "stack.env")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// inside reports whether process pid works in root or below it ("" is
// everywhere).
func inside(root, pid string) bool {
	if root == "" {
		return true
	}
	cwd, err := os.Readlink(filepath.Join("/proc", pid, "cwd"))
	return err == nil && (cwd == root || strings.HasPrefix(cwd, root+string(filepath.Separator)))
}

// Sample reads /proc once: the processes of the stack working inside
// root (see Root). On a system without /proc it returns an empty
// sample.
func Sample(root string) Snapshot {
	out := Snapshot{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || len(cmd) == 0 {
			continue
		}
		exe := filepath.Base(string(bytes.SplitN(cmd, []byte{0}, 2)[0]))
		for _, c := range components {
			if !c.match(exe, cmd) {
				continue
			}
			if !inside(root, d.Name()) {
				break
			}
			if t, ok := Process(pid); ok {
				out[pid] = procTime{component: c.name, cpu: t}
			}
			break
		}
	}
	return out
}

// Process is the user and system CPU process pid has used so far; false
// when the pid is unset or unreadable.
func Process(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	return parseStat(string(b))
}

// parseStat reads utime and stime from a /proc/<pid>/stat line. The
// command name (field 2) may hold spaces and parentheses; the fields after
// its last ')' are space-separated, utime and stime the 12th and 13th.
func parseStat(stat string) (time.Duration, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / userHZ, true
}

// Stack adds up the CPU of the stack's components in cpu (as Since gives
// it), leaving out the load generator's own.
func Stack(cpu map[string]time.Duration) time.Duration {
	var total time.Duration
	for c, d := range cpu {
		if c != "loadtest" {
			total += d
		}
	}
	return total
}

// Since is the CPU each component used between before and s: per process,
// from its time in before (or from its start when it began after before).
// A process that ended in between is not counted (a previous run's
// services still stopping would otherwise subtract their whole life).
func (s Snapshot) Since(before Snapshot) map[string]time.Duration {
	out := map[string]time.Duration{}
	for pid, p := range s {
		b, ok := before[pid]
		if ok && b.component == p.component {
			out[p.component] += p.cpu - b.cpu
		} else {
			out[p.component] += p.cpu
		}
	}
	return out
}
