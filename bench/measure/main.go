// Command measure times commands side by side for the bench scripts: each
// command is run directly (no shell, no time(1) in between), once to warm
// up and then N times, the commands taking turns run after run so that a
// machine that speeds up or slows down during the bench affects them all
// alike. For each command it prints one line: the median wall time (s, from
// start to exit), CPU time (user+system s) and peak RSS (KiB), with the
// command's standard output discarded.
//
//	measure -n 5 -- pmrep -a ARCH ... ::: pcp-exporter replay ARCH ...
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 5, "timed runs of each command")
	flag.Parse()
	var cmds [][]string
	cur := []string{}
	for _, a := range flag.Args() {
		if a == ":::" {
			cmds = append(cmds, cur)
			cur = []string{}
			continue
		}
		cur = append(cur, a)
	}
	cmds = append(cmds, cur)
	for _, c := range cmds {
		if len(c) == 0 {
			fmt.Fprintln(os.Stderr, "measure: empty command")
			os.Exit(2)
		}
	}
	walls := make([][]float64, len(cmds))
	cpus := make([][]float64, len(cmds))
	rsss := make([][]float64, len(cmds))
	for run := -1; run < *n; run++ {
		for i, c := range cmds {
			w, cpu, rss, err := once(c)
			if err != nil {
				fmt.Fprintf(os.Stderr, "measure: %s: %v\n", strings.Join(c, " "), err)
				os.Exit(1)
			}
			if run < 0 {
				continue // warm-up
			}
			walls[i] = append(walls[i], w)
			cpus[i] = append(cpus[i], cpu)
			rsss[i] = append(rsss[i], rss)
		}
	}
	for i := range cmds {
		fmt.Printf("%.6f %.3f %.0f\n", median(walls[i]), median(cpus[i]), median(rsss[i]))
	}
}

// once runs c and returns its wall time, CPU time and peak RSS (KiB).
func once(c []string) (wall, cpu, rss float64, err error) {
	cmd := exec.Command(c[0], c[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, 0, fmt.Errorf("%v\n%s", err, stderr.Bytes())
	}
	wall = time.Since(start).Seconds()
	st := cmd.ProcessState
	cpu = (st.UserTime() + st.SystemTime()).Seconds()
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		rss = float64(ru.Maxrss)
	}
	return wall, cpu, rss, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
