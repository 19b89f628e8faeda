package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// writeProcess adds the process's memory to /metrics: resident and peak
// resident set (Linux /proc), Go heap and goroutines. Capacity engineers
// read the peak after a sale.
func writeProcess(w io.Writer) {
	if rss, peak, ok := procMemory(); ok {
		fmt.Fprintf(w, "# HELP process_resident_memory_bytes Resident memory.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %d\n", rss)
		fmt.Fprintf(w, "# HELP flashsale_process_peak_resident_memory_bytes Peak resident memory (VmHWM).\n# TYPE flashsale_process_peak_resident_memory_bytes gauge\nflashsale_process_peak_resident_memory_bytes %d\n", peak)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(w, "# HELP go_memstats_heap_alloc_bytes Go heap in use.\n# TYPE go_memstats_heap_alloc_bytes gauge\ngo_memstats_heap_alloc_bytes %d\n", ms.HeapAlloc)
	fmt.Fprintf(w, "# HELP go_goroutines Goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
}

func procMemory() (rss, peak int64, ok bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), ":")
		if !found {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return rss, peak, rss > 0
}
