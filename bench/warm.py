#!/usr/bin/env python3
"""A one-VM change at N VMs: cold through a new vnet process, warm through a
running vnet server's API, beside the same netlink requests made directly.

One host, one private switch with one port group, N VMs with one vNIC each
(bench/scale.py's spec). vnet's first apply of the N VMs runs through the
CLI; once the kernel is quiet (see bench/scale.py) each round, in the same
run and under the same lock, times the same three changes (add a VM, change
its address, remove it) three ways, one after the other, and raw netlink
the same changes:

  cli       `vnet apply FILE`: a new process loads the spec, opens the store
            and the kernel's handles, applies and writes the record
  server    `vnet --server URL apply FILE`: a new client process, the change
            applied by the running server
  api       PUT /api/v1/infras/NAME from this script over a kept-alive
            connection: the server's warm path alone
  raw       bench/rawnetlink issues the change's netlink requests directly:
            the namespace, the veth pair, its port on the bridge, the address
  raw+bpf   the same, and what vnet's port security makes of each port in
            the kernel (bench/rawnetlink -portprogs): a clsact hook, a
            filter on each direction running two BPF programs the ports
            share, and the port's entry in their map

It prints the median of each over --changes rounds, and each one's ratio to
raw netlink (whose N VMs it makes after vnet's are gone), both rows. The cli, server
and api changes all apply to the same infrastructure, so warm changes
follow changes another process made: what the server keeps must notice
them. After the rounds a no-op apply through the API must plan nothing and
status must show the N VMs.

usage: bench/warm.py [--vnet bin/vnet[,OTHER]] [--sizes 100,1000] [--changes 20]
                     [--quiet 120] [--cpuprofile FILE] [--trace]

--vnet may name several builds, comma-separated (say, before and after a
change): each is measured in turn under the same lock, beside one raw
netlink measurement, and gets rows of its own. --cpuprofile writes the
server's CPU profile (VNET_CPUPROFILE) of the largest N to FILE (with
several builds, FILE.1, FILE.2, ... in their order); --trace prints the
server's VNET_TRACE lines. Needs root
and Go (it builds bench/rawnetlink). It takes /tmp/vnet-kernel.lock for each
size itself (do not wrap it in flock) and removes what it made. Not a test:
it prints measurements.
"""
import argparse, fcntl, json, os, shutil, signal, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import LOCK, Raw, Server, build_raw, ip, run, spec, terminate, wait_quiet  # noqa: E402

WAYS = ("cli", "server", "api", "raw", "raw+bpf")
VNET_WAYS = WAYS[:3]


def measure(vnet, n, changes, quiet, cpuprofile, trace):
    """Times the changes through vnet's three ways; returns their medians."""
    tag = f"w{os.getpid() % 100000}n{n}"
    name = "wrm" + tag
    state = os.path.realpath(os.path.join("/tmp", "vnet-warm." + tag))
    os.makedirs(state, exist_ok=True)
    path = os.path.join(state, "spec.yaml")
    vms = [(f"vm{i}", ip(i), "h1") for i in range(1, n + 1)]
    extra = f"vm{n + 1}"

    def write(vm_list):
        text = spec(name, vm_list)
        with open(path, "w") as f:
            f.write(text)
        return text

    def cli(vm_list, *client):
        write(vm_list)
        return run([vnet, "--state-dir", state, *client, "apply", path])[0]

    times = {w: {"add": [], "change": [], "remove": []} for w in VNET_WAYS}
    srv = None
    try:
        cli(vms)
        waited = wait_quiet(quiet, f"vnet's first apply of {n} VMs")
        srv = Server(vnet, state, cpuprofile, trace)
        steps = {
            "cli": lambda v: cli(v),
            "server": lambda v: cli(v, "--server", srv.url),
            "api": lambda v: srv.put(name, write(v))[0],
        }
        srv.put(name, write(vms))  # the server's first request reads what it keeps
        for k in range(changes):
            for way, step in steps.items():
                times[way]["add"].append(step(vms + [(extra, ip(n + 1), "h1")]))
                times[way]["change"].append(step(vms + [(extra, ip(n + 2 + k), "h1")]))
                times[way]["remove"].append(step(vms))
        # What the warm path applied is what the kernel has.
        _, res = srv.put(name, write(vms))
        if res.get("changes"):
            raise RuntimeError(f"a no-op apply through the API after the changes planned {res['changes']} changes")
        st = json.loads(run([vnet, "--state-dir", state, "status", "-o", "json", name])[2].stdout)
        if vm_count(st) != n:
            raise RuntimeError(f"status after the changes shows {vm_count(st)} VMs, the spec {n}")
        print(f"N={n}: waited {waited:.1f} s for a quiet kernel; status after the changes: {n} VMs", flush=True)
    finally:
        if srv:
            srv.stop()
            if trace:
                print(srv.output())
        subprocess.run([vnet, "--state-dir", state, "destroy", name], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)
    return medians(times)


def measure_raw(raw, n, changes, quiet):
    """Times the same changes' netlink requests, made directly."""
    times = {"add": [], "change": [], "remove": []}
    try:
        raw.timed("up", str(n))
        wait_quiet(quiet, f"raw netlink's {n} VMs ({' '.join(raw.flags) or 'no flags'})")
        i = n + 1
        for k in range(changes):
            times["add"].append(raw.timed("add", str(i), ip(i)))
            times["change"].append(raw.timed("addr", str(i), ip(n + 2 + k)))
            times["remove"].append(raw.timed("rm", str(i)))
    finally:
        raw.cleanup()
    return medians({"raw": times})["raw"]


def medians(times):
    return {w: {op: statistics.median(v) for op, v in ops.items()} for w, ops in times.items()}


def vm_count(st):
    """The number of VMs JSON status shows."""
    infra = st[0] if isinstance(st, list) else st
    return len(infra.get("vms") or [])


def report(results, labels):
    print(f"\n{'N':>6} {'change':<8}" + (f"{'build':<12}" if len(labels) > 1 else "") + "".join(f"{w:>10}" for w in WAYS)
          + "".join(f"{w + '/raw':>12}" for w in VNET_WAYS) + f"{'api/raw+bpf':>13}" + f"{'cli/api':>10}")
    for (n, label), r in results.items():
        for op in ("add", "change", "remove"):
            row = f"{n:>6} {op:<8}" + (f"{label:<12}" if len(labels) > 1 else "")
            row += "".join(f"{r[w][op] * 1000:>8.1f}ms" for w in WAYS)
            row += "".join(f"{r[w][op] / r['raw'][op]:>11.1f}x" for w in VNET_WAYS)
            row += f"{r['api'][op] / r['raw+bpf'][op]:>12.1f}x"
            row += f"{r['cli'][op] / r['api'][op]:>9.1f}x"
            print(row)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vnet", default="bin/vnet")
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--quiet", type=float, default=120)
    ap.add_argument("--cpuprofile", help="the server's CPU profile at the largest N")
    ap.add_argument("--trace", action="store_true", help="print the server's VNET_TRACE lines")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("warm.py: needs root")
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    vnets = [os.path.abspath(v) for v in a.vnet.split(",")]
    labels = [os.path.basename(v) for v in vnets]
    raw_exe = build_raw()
    sizes = [int(s) for s in a.sizes.split(",")]
    print(f"machine: {os.cpu_count()} CPUs")
    for label, vnet in zip(labels, vnets):
        print(f"{label}: {run([vnet, '--version'])[2].stdout.strip()}")
    results = {}
    try:
        for n in sizes:
            raws = {"raw": Raw(raw_exe, f"w{os.getpid() % 100000}r{n}"),
                    "raw+bpf": Raw(raw_exe, f"w{os.getpid() % 100000}b{n}", flags=["-portprogs"])}
            with open(LOCK, "a") as lk:
                fcntl.flock(lk, fcntl.LOCK_EX)
                try:
                    for i, (label, vnet) in enumerate(zip(labels, vnets), 1):
                        prof = None
                        if a.cpuprofile and n == sizes[-1]:
                            prof = os.path.abspath(a.cpuprofile) + (f".{i}" if len(vnets) > 1 else "")
                        results[(n, label)] = measure(vnet, n, a.changes, a.quiet, prof, a.trace)
                    for way, raw in raws.items():
                        raw_times = measure_raw(raw, n, a.changes, a.quiet)
                        for label in labels:
                            results[(n, label)][way] = raw_times
                finally:
                    fcntl.flock(lk, fcntl.LOCK_UN)
    finally:
        shutil.rmtree(os.path.dirname(raw_exe), ignore_errors=True)
    report(results, labels)


if __name__ == "__main__":
    main()
