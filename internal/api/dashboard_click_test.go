package api

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// A person picks a generation in the dashboard's history by clicking its
// number: the row is marked picked, the diff from it to the generation in
// force appears, the address keeps the pick, and a second click hides the
// diff again. The real Chromium is driven through its DevTools protocol
// (chromedp), as a person's clicks would drive it; what the page logs to
// its console or throws fails the test.
func TestDashboardHistoryClickShowsTheDiff(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	bin := chromium(t)
	srv := historyServer(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1800))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	var mu sync.Mutex
	var logged []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value))
			}
			logged = append(logged, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			what := d.Text
			if d.Exception != nil {
				what += " " + d.Exception.Description
			}
			logged = append(logged, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, what))
		}
	}
	browser, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithListener(listen))
	defer cancelBrowser()
	// The first run starts the browser: it gets no timeout of its own,
	// which would end the browser with it (chromedp.Run).
	if err := chromedp.Do(browser, chromedp.Navigate(srv+"/?infra=c1")); err != nil {
		t.Fatalf("load the dashboard: %v", err)
	}
	ctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()
	gen2 := chromedp.CSS(`#history tbody tr[data-generation="2"][data-verb="apply"] button`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(gen2), chromedp.Click(gen2),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-from="2"] .change`))); err != nil {
		t.Fatalf("click generation 2 in the history: %v", err)
	}
	diff, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("#diff")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"From generation 2 to generation 3", `data-op="change" data-ref="vnic eth0 of vm vm2"`,
		`<td class="was">10.20.0.3/24</td><td class="now">10.20.0.2/24</td>`} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff shown after the click lacks %q:\n%s", want, diff)
		}
	}
	picked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#history tr[data-generation="2"][data-verb="apply"]').classList.contains("selected")`))
	if err != nil || !picked {
		t.Errorf("generation 2's row is not marked picked after the click (%v)", err)
	}
	location, err := chromedp.Run(ctx, chromedp.Location())
	if u, perr := url.Parse(location); err != nil || perr != nil || u.Query().Get("gen") != "2" {
		t.Errorf("the address after the click is %q (%v), want it to keep gen=2", location, err)
	}
	// A second click on the same generation hides its diff.
	if err := chromedp.Do(ctx, chromedp.Click(gen2),
		chromedp.Poll[chromedp.Void](`document.querySelector("#diff").children.length === 0`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("click generation 2 again: %v", err)
	}
	if left, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#history tr.selected").length`)); err != nil || left != 0 {
		t.Errorf("%d rows stay marked picked after the second click (%v)", left, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range logged {
		t.Errorf("the page logged %s", l)
	}
}
