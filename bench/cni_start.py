#!/usr/bin/env python3
"""What a CNI call costs before the plugin does any work: vnet-cni beside vnet under its name.

A runtime starts the plugin afresh for every ADD, DEL and CHECK, so the
time from exec to exit of a call that does next to nothing is paid by every
container. This runs, --calls times per round and --rounds rounds, with the
binaries taking turns at going first:
  VERSION  the plugin says which specifications it speaks;
  DEL      of a container in a state directory that holds no store (the
           plugin reads its configuration, finds nothing, makes nothing);
for bin/vnet-cni, for bin/vnet called by the name vnet-cni (a symbolic
link, as a plugin directory may hold it) and, for reference, Debian's
bridge plugin (VERSION only). Printed: median and 90th percentile per
binary and command, and each over vnet-cni's median.

usage: bench/cni_start.py [--bin DIR] [--calls 200] [--rounds 3]
DIR holds vnet and vnet-cni (make build puts them in bin/). No root, no
kernel change; a quiet machine gives steadier figures. Not a test: it
prints measurements and ratios.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

BRIDGE = "/usr/lib/cni/bridge"


def call(exe, command, conf, env_extra):
    """Runs one CNI call and returns its wall time in ms."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": command, "CNI_CONTAINERID": "bench",
           "CNI_NETNS": "/run/netns/none", "CNI_IFNAME": "eth0", "CNI_PATH": "/usr/lib/cni"}
    env.update(env_extra)
    start = time.perf_counter()
    r = subprocess.run([exe], input=conf, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = (time.perf_counter() - start) * 1e3
    if r.returncode != 0:
        sys.exit(f"{exe} {command}: exit {r.returncode}: {r.stdout.decode()} {r.stderr.decode()}")
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--bin", default=os.path.join(here, "bin"))
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="cnistart.")
    as_plugin = os.path.join(work, "vnet-cni")
    os.symlink(os.path.abspath(os.path.join(a.bin, "vnet")), as_plugin)
    binaries = {"vnet-cni": os.path.abspath(os.path.join(a.bin, "vnet-cni")), "vnet as vnet-cni": as_plugin}
    for name, exe in binaries.items():
        if not os.path.exists(exe):
            sys.exit(f"{name}: {exe} missing: make build")
    conf = json.dumps({"cniVersion": "1.0.0", "name": "bench", "type": "vnet-cni", "infra": "bench",
                       "portgroup": "pg", "stateDir": os.path.join(work, "no-store")}).encode()
    bridge_conf = json.dumps({"cniVersion": "1.0.0", "name": "bench", "type": "bridge"}).encode()
    times = {}
    order = list(binaries)
    for rnd in range(a.rounds):
        for name in (order if rnd % 2 == 0 else order[::-1]):
            for command in ("VERSION", "DEL"):
                times.setdefault((name, command), []).extend(
                    call(binaries[name], command, conf, {}) for _ in range(a.calls))
        if os.path.exists(BRIDGE):
            times.setdefault(("bridge", "VERSION"), []).extend(
                call(BRIDGE, "VERSION", bridge_conf, {}) for _ in range(a.calls))
    if os.path.exists(os.path.join(work, "no-store")):
        sys.exit("a DEL made a state directory where there was none")
    print(f"machine: {os.cpu_count()} CPUs; {a.rounds} rounds of {a.calls} calls per binary and command")
    print(f"{'binary':<18} {'command':<8} {'median':>9} {'p90':>9} {'÷ vnet-cni':>11}")
    for (name, command), ts in times.items():
        base = statistics.median(times[("vnet-cni", command)])
        med = statistics.median(ts)
        p90 = statistics.quantiles(ts, n=10)[-1]
        print(f"{name:<18} {command:<8} {med:>7.2f}ms {p90:>7.2f}ms {med / base:>10.2f}x")
    os.remove(as_plugin)
    os.rmdir(work)


if __name__ == "__main__":
    main()
