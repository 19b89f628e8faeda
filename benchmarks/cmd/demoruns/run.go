package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// result is one demo run's figures, read from the load generator's
// report.json.
type result struct {
	variant   string
	load      float64 // 1-minute load average before the run
	SellOutMs int64   `json:"sell_out_ms"`
	PersistMs int64   `json:"persist_ms"`
	// Backlog is what earlier sales still had due at the start (the
	// loadtest waits for the order service to work it off, up to a bound).
	Backlog int64   `json:"backlog_at_start"`
	RPS     float64 `json:"requests_per_second"`
	Latency map[string]struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
	PublishAckMs struct{ P50, P99 float64 } `json:"publish_ack_ms"`
	PurchaseMs   struct{ P50, P99 float64 } `json:"gateway_purchase_ms"`
	SellingCPUMs map[string]float64         `json:"selling_cpu_ms"`
	StackCPU     float64                    `json:"stack_cpu_per_order_us"`
	GatewayCPU   float64                    `json:"gateway_cpu_per_order_us"`
	Audit        struct {
		Oversold       int64 `json:"oversold"`
		Lost           int64 `json:"lost"`
		Duplicates     int64 `json:"duplicates"`
		StockConserved bool  `json:"stock_conserved"`
	} `json:"audit"`
}

func (r result) auditOK() bool {
	a := r.Audit
	return a.Oversold == 0 && a.Lost == 0 && a.Duplicates == 0 && a.StockConserved
}

// demo runs deploy/demo.sh once with v's settings, its output in dir, and
// reads the report it leaves there.
func demo(ctx context.Context, v variant, dir string) (result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{}, err
	}
	load := loadAverage()
	log, err := os.Create(filepath.Join(dir, "demo.log"))
	if err != nil {
		return result{}, err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, "bash", "deploy/demo.sh")
	cmd.Env = append(os.Environ(), v.env...)
	// The report and the services' logs of each run stay in its directory,
	// so a run that stands out can be read afterwards.
	cmd.Env = append(cmd.Env, "DEMO_OUT="+dir, "DEMO_LOGS="+dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("deploy/demo.sh: %w (its output: %s)", err, log.Name())
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return result{}, fmt.Errorf("the demo left no report: %w", err)
	}
	r := result{variant: v.label, load: load}
	if err := json.Unmarshal(b, &r); err != nil {
		return result{}, fmt.Errorf("read %s: %w", filepath.Join(dir, "report.json"), err)
	}
	return r, nil
}

// loadAverage is the 1-minute load average (-1 when /proc has none).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		return -1
	}
	return f
}
