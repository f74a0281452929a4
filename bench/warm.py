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
            connection: the server's warm path alone, sent the whole spec
  vm api    PUT and DELETE /api/v1/infras/NAME/vms/VM over the same
            connection: the warm path sent only the VM's entry (a build
            without that resource shows -)
  raw       bench/rawnetlink issues the change's netlink requests directly:
            the namespace, the veth pair, its port on the bridge, the address
  raw+bpf   the same, and what vnet's port security makes of each port in
            the kernel (bench/rawnetlink -portprogs): a clsact hook, a
            filter on each direction running two BPF programs the ports
            share, and the port's entry in their map

It prints the median of each over --changes rounds, and each one's ratio to
raw netlink (whose N VMs it makes after vnet's are gone), both rows. The cli, server,
api and vm api changes all apply to the same infrastructure, so warm changes
follow changes another process made: what the server keeps must notice
them. After the rounds a no-op apply through the API must plan nothing and
status must show the N VMs.

usage: bench/warm.py [--vnet bin/vnet[,OTHER]] [--sizes 100,1000] [--changes 20]
                     [--quiet 120] [--cpuprofile FILE] [--trace] [--lock-held]

--vnet may name several builds, comma-separated (say, before and after a
change): each is measured in turn under the same lock, beside one raw
netlink measurement, and gets rows of its own. A build measured after
another fares better than the same build measured first, so the rounds
are run in as many passes as there are builds, each pass measuring every
build in turn (a new infrastructure each time), and the builds take turns
at going first: with two, the first pass measures A then B, the second B
then A, each pass --changes/2 rounds (rounded up on the first), and each
build's medians are of its rounds of all passes. --cpuprofile writes the
server's CPU profile (VNET_CPUPROFILE) of the largest N to FILE (with
several builds, FILE.1, FILE.2, ... in --vnet's order, of their first
pass); --trace prints the
server's VNET_TRACE lines, then the time of each request as this script
saw it, to compare with the server's log of it. Needs root
and Go (it builds bench/rawnetlink). It takes /tmp/vnet-kernel.lock for each
size itself (do not wrap it in flock), unless --lock-held says its caller
holds it already (flock /tmp/vnet-kernel.lock flock -x /tmp/vnet-quiet.lock
bench/warm.py --lock-held: the kernel's lock first, as bench/cni.py's
callers take them), and removes what it made. Not a test:
it prints measurements.
"""
import argparse, fcntl, json, os, shutil, signal, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import LOCK, Raw, Server, build_raw, ip, run, spec, terminate, wait_quiet  # noqa: E402

WAYS = ("cli", "server", "api", "vm api", "raw", "raw+bpf")
VNET_WAYS = WAYS[:4]


def measure(vnet, n, changes, quiet, cpuprofile, trace):
    """Times the changes through vnet's ways; returns each one's times."""
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
        whole = {
            "cli": lambda v: cli(v),
            "server": lambda v: cli(v, "--server", srv.url),
            "api": lambda v: srv.put(name, write(v))[0],
        }
        steps = {way: {"add": lambda k, f=f: f(vms + [(extra, ip(n + 1), "h1")]),
                       "change": lambda k, f=f: f(vms + [(extra, ip(n + 2 + k), "h1")]),
                       "remove": lambda k, f=f: f(vms)} for way, f in whole.items()}
        srv.put(name, write(vms))  # the server's first request reads what it keeps
        one = f"/api/v1/infras/{name}/vms/{extra}"
        if srv.call("GET", f"/api/v1/infras/{name}/vms/vm1", ok=(200, 404))[1] != 404:  # the status, or the answer
            steps["vm api"] = {"add": lambda k: srv.call("PUT", one, vm_entry(extra, ip(n + 1)))[0],
                               "change": lambda k: srv.call("PUT", one, vm_entry(extra, ip(n + 2 + k)))[0],
                               "remove": lambda k: srv.call("DELETE", one)[0]}
        else:
            del times["vm api"]
        for k in range(changes):
            for way, ops in steps.items():
                for op, step in ops.items():
                    times[way][op].append(step(k))
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
                # Beside the server's "200 in X ms" of each change: what the
                # same request took as this script saw it.
                print(f"the client's time of each request from 127.0.0.1:{srv.port_from}, in order:")
                for method, path, dt in srv.calls:
                    print(f"  {method} {path}: {dt * 1000:.1f} ms")
        subprocess.run([vnet, "--state-dir", state, "destroy", name], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)
    return times


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


def turns(count, changes):
    """The passes over count builds: in each, the builds' indexes in the
    order they are measured and the rounds each gets. Each build goes first
    in one pass, second in another, and so on, so that none has the
    advantage of being measured after the others."""
    if count == 1:
        return [([0], changes)]
    passes = []
    for p in range(count):
        rounds = changes // count + (p < changes % count)
        if rounds:
            passes.append(([(p + i) % count for i in range(count)], rounds))
    return passes


def pooled(into, times):
    """Adds times (way: op: list) to into's lists."""
    for way, ops in times.items():
        for op, v in ops.items():
            into.setdefault(way, {}).setdefault(op, []).extend(v)
    return into


def medians(times):
    return {w: {op: statistics.median(v) for op, v in ops.items()} for w, ops in times.items()}


def vm_entry(vm, addr):
    """A VM's entry as spec() writes it in the list of VMs."""
    return spec("x", [(vm, addr, "h1")]).split("vms:\n  - ", 1)[1]


def vm_count(st):
    """The number of VMs JSON status shows."""
    infra = st[0] if isinstance(st, list) else st
    return len(infra.get("vms") or [])


def report(results, labels):
    bpf = ("api", "vm api")
    print(f"\n{'N':>6} {'change':<8}" + (f"{'build':<12}" if len(labels) > 1 else "") + "".join(f"{w:>10}" for w in WAYS)
          + "".join(f"{w + '/raw':>12}" for w in VNET_WAYS) + "".join(f"{w + '/raw+bpf':>16}" for w in bpf)
          + f"{'cli/api':>10}")

    def ms(r, w, op):
        return f"{r[w][op] * 1000:>8.1f}ms" if w in r else f"{'-':>10}"

    def ratio(r, a, b, op, width):
        return f"{r[a][op] / r[b][op]:>{width - 1}.1f}x" if a in r else f"{'-':>{width}}"

    for (n, label), r in results.items():
        for op in ("add", "change", "remove"):
            row = f"{n:>6} {op:<8}" + (f"{label:<12}" if len(labels) > 1 else "")
            row += "".join(ms(r, w, op) for w in WAYS)
            row += "".join(ratio(r, w, "raw", op, 12) for w in VNET_WAYS)
            row += "".join(ratio(r, w, "raw+bpf", op, 16) for w in bpf)
            row += ratio(r, "cli", "api", op, 10)
            print(row)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vnet", default="bin/vnet")
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--quiet", type=float, default=120)
    ap.add_argument("--cpuprofile", help="the server's CPU profile at the largest N")
    ap.add_argument("--trace", action="store_true", help="print the server's VNET_TRACE lines")
    ap.add_argument("--lock-held", action="store_true", help=f"the caller holds {LOCK} already: do not take it")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("warm.py: needs root")
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    vnets = [os.path.abspath(v) for v in a.vnet.split(",")]
    labels = [os.path.basename(v) for v in vnets]
    if len(set(labels)) < len(labels):  # /tmp/base/vnet,/tmp/new/vnet: name each by its directory too
        labels = [os.path.join(os.path.basename(os.path.dirname(v)), os.path.basename(v)) for v in vnets]
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
                if not a.lock_held:
                    fcntl.flock(lk, fcntl.LOCK_EX)
                try:
                    times = {label: {} for label in labels}
                    for p, (order, rounds) in enumerate(turns(len(vnets), a.changes)):
                        for i in order:
                            prof = None
                            if a.cpuprofile and n == sizes[-1] and p == 0:
                                prof = os.path.abspath(a.cpuprofile) + (f".{i + 1}" if len(vnets) > 1 else "")
                            if len(vnets) > 1:
                                print(f"N={n}, pass {p + 1}: {labels[i]}, {rounds} rounds", flush=True)
                            pooled(times[labels[i]], measure(vnets[i], n, rounds, a.quiet, prof, a.trace))
                    for label in labels:
                        results[(n, label)] = medians(times[label])
                    for way, raw in raws.items():
                        raw_times = measure_raw(raw, n, a.changes, a.quiet)
                        for label in labels:
                            results[(n, label)][way] = raw_times
                finally:
                    if not a.lock_held:
                        fcntl.flock(lk, fcntl.LOCK_UN)
    finally:
        shutil.rmtree(os.path.dirname(raw_exe), ignore_errors=True)
    report(results, labels)


if __name__ == "__main__":
    main()
