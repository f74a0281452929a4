package lab

import (
	"fmt"
	"time"

	"github.com/schollz/progressbar/v3"
)

func (p *Progress) phase(exp, phase string, d time.Duration) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	desc := fmt.Sprintf("%-20s %s", exp, phase)
	if !p.Terminal {
		fmt.Fprintf(p.Out, "  %s (%s)\n", desc, d)
		return func() {}
	}
	bar := progressbar.NewOptions64(d.Milliseconds(),
		progressbar.OptionSetWriter(p.Out),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	stop := make(chan struct{})
	go func() {
		start := time.Now()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				bar.Set64(min(time.Since(start).Milliseconds(), d.Milliseconds()))
			}
		}
	}()
	return func() {
		close(stop)
		bar.Finish()
		fmt.Fprintf(p.Out, "  %s done\n", desc)
	}
}
