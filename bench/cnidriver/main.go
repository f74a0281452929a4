// Command cnidriver adds and deletes containers through libcni, as a
// container runtime does, and times each command: bench/cni.py runs it
// for vnet-cni and for Debian's bridge plugin side by side. Container I is
// the namespace /run/netns/PREFIX-I (made beforehand, as a runtime makes
// it before ADD) with container ID PREFIX-I and interface eth0.
//
// Every plugin runs in the namespace -runtime names, as if the runtime
// lived there: a plugin that makes links in its own namespace (bridge
// makes its bridge and the containers' host ends there) then leaves the
// machine's namespace alone.
//
// usage:
//
//	cnidriver -conf LIST -path DIRS -cache DIR -runtime NS -prefix P [-workers K] add|del FROM TO
//
// It prints, as JSON, the wall time of the whole batch and each command's
// time in the order of I, in seconds. The first command that fails ends it
// with exit status 1.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/vnet-project/vnet/internal/dataplane/nsthread"
)

// batch is what one run of the driver reports.
type batch struct {
	Op      string    `json:"op"`
	Count   int       `json:"count"`
	Workers int       `json:"workers"`
	Wall    float64   `json:"wall_s"`
	Each    []float64 `json:"each_s"`
}

type driver struct {
	cni     *libcni.CNIConfig
	list    *libcni.NetworkConfigList
	runtime string
	prefix  string
}

func main() {
	conf := flag.String("conf", "", "the network configuration list (a .conflist file)")
	path := flag.String("path", "/usr/lib/cni", "the plugin directories, separated by colons")
	cache := flag.String("cache", "", "libcni's cache directory (keep it from ADD to DEL)")
	runtimeNS := flag.String("runtime", "", "the namespace in /run/netns the plugins run in")
	prefix := flag.String("prefix", "", "container I is the namespace and container ID PREFIX-I")
	workers := flag.Int("workers", 1, "how many commands run at once")
	flag.Parse()
	if flag.NArg() != 3 || *conf == "" || *cache == "" || *runtimeNS == "" || *prefix == "" || *workers < 1 {
		fmt.Fprintln(os.Stderr, "usage: cnidriver -conf LIST -path DIRS -cache DIR -runtime NS -prefix P [-workers K] add|del FROM TO")
		os.Exit(2)
	}
	op := flag.Arg(0)
	from, err1 := strconv.Atoi(flag.Arg(1))
	to, err2 := strconv.Atoi(flag.Arg(2))
	if (op != "add" && op != "del") || err1 != nil || err2 != nil || from > to {
		fmt.Fprintf(os.Stderr, "cnidriver: want add|del FROM TO with FROM <= TO, got %q\n", strings.Join(flag.Args(), " "))
		os.Exit(2)
	}
	list, err := libcni.ConfListFromFile(*conf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cnidriver:", err)
		os.Exit(2)
	}
	d := &driver{cni: libcni.NewCNIConfigWithCacheDir(filepath.SplitList(*path), *cache, nil),
		list: list, runtime: *runtimeNS, prefix: *prefix}
	b, err := d.run(op, from, to, *workers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cnidriver:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(b); err != nil {
		fmt.Fprintln(os.Stderr, "cnidriver:", err)
		os.Exit(1)
	}
}

// run runs op for containers from..to-1 on workers at once, handing them
// out in order.
func (d *driver) run(op string, from, to, workers int) (batch, error) {
	b := batch{Op: op, Count: to - from, Workers: workers, Each: make([]float64, to-from)}
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				took, err := d.one(op, i)
				if err != nil {
					errs <- err
					return
				}
				b.Each[i-from] = took.Seconds()
			}
		}()
	}
	var err error
hand:
	for i := from; i < to; i++ {
		select {
		case next <- i:
		case err = <-errs:
			break hand
		}
	}
	close(next)
	wg.Wait()
	b.Wall = time.Since(start).Seconds()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return b, err
}

// one runs op for container i from a thread in the runtime's namespace:
// the plugins libcni starts are forked from that thread and so run there.
func (d *driver) one(op string, i int) (time.Duration, error) {
	name := fmt.Sprintf("%s-%d", d.prefix, i)
	rt := &libcni.RuntimeConf{ContainerID: name, NetNS: "/run/netns/" + name, IfName: "eth0"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var took time.Duration
	err := nsthread.InNamed(d.runtime, func() error {
		start := time.Now()
		var err error
		if op == "add" {
			_, err = d.cni.AddNetworkList(ctx, d.list, rt)
		} else {
			err = d.cni.DelNetworkList(ctx, d.list, rt)
		}
		took = time.Since(start)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", op, name, err)
	}
	return took, nil
}
