#!/usr/bin/env python3
"""Where a container's ADD through vnet-cni goes, with N containers there, build beside build.

The local plugin (each CNI command a new vnet process that opens the state
store itself, as bench/cni.py's "vnet") on a standing infrastructure of N
containers: each build given gets an infrastructure, a state directory and
containers of its own (the spec of bench/cni.py's), filled to N through
libcni one ADD at a time (not timed). Then, --rounds times, the builds
taking turns in an order that turns from round to round, each adds --probe
more containers one at a time with VNET_TRACE=1 and deletes them again:
every ADD and DEL is timed through libcni (bench/cnidriver), and the plugin's
trace says where the ADD's time went (its phases: opening the store and the
dataplane with the lock, reading the applied spec, writing the VM into it,
and the apply's own steps). Printed per N: each build's medians, and the
later builds' over the first's (below 1: less time).

usage: bench/cni_steps.py --vnet OLD,NEW [--sizes 100,1000] [--probe 10] [--rounds 3]
Needs root, Go (it builds bench/cnidriver) and containernetworking-plugins
(only for libcni's cache; no Debian plugin runs). It takes
/tmp/vnet-kernel.lock for the whole run itself. Not a test: it prints
measurements and ratios.
"""
import argparse, collections, fcntl, json, os, re, shutil, signal, statistics, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vnetlab import VnetLab  # noqa: E402
from cni import spec, terminate  # noqa: E402

LOCK = "/tmp/vnet-kernel.lock"
PREFIX = "cnis"
RUNTIME_NS = f"{PREFIX}-rt"
HERE = os.path.dirname(os.path.abspath(__file__))
# A trace line: "   12.3 ms  what" (a step of the execution is indented
# further and starts with its kind: left out, the execution counts whole).
TRACE = re.compile(r"^ {0,6}(\d+\.\d) ms  (.*)$")


class Standing:
    """One build's infrastructure of n containers: its state directory,
    configuration list, libcni cache and container namespaces."""

    def __init__(self, run, build, k, n):
        self.run, self.lab, self.k, self.n = run, VnetLab(build), k, n
        self.infra = f"{PREFIX}{k}n{n}"
        self.prefix = f"{PREFIX}-{k}-{n}"
        self.plugins = os.path.join(run.work, f"plugins-{k}")
        os.makedirs(self.plugins, exist_ok=True)
        if not os.path.exists(os.path.join(self.plugins, "vnet-cni")):
            os.symlink(self.lab.cni_plugin(), os.path.join(self.plugins, "vnet-cni"))
        self.conf = os.path.join(run.work, f"{self.infra}.conflist")
        self.cache = os.path.join(run.work, f"cache-{self.infra}")
        self.applied = False

    def set_up(self, probe):
        self.lab.apply(spec(self.infra))
        self.applied = True
        with open(self.conf, "w") as f:
            json.dump({"cniVersion": "1.0.0", "name": self.infra, "plugins": [
                {"type": "vnet-cni", "infra": self.infra, "portgroup": "pg-bench", "stateDir": self.lab.state,
                 "ipam": {"type": "vnet"}}]}, f)
        os.makedirs(self.cache)
        for i in range(1, self.n + probe + 1):
            self.run.netns(f"{self.prefix}-{i}")
        for first in range(1, self.n + 1, 100):
            self.drive("add", first, min(first + 99, self.n))

    def drive(self, op, first, last, trace=False):
        """op for containers first..last; the driver's report and the
        plugins' standard error."""
        env = dict(os.environ, VNET_TRACE="1") if trace else None
        r = subprocess.run([self.run.driver, "-conf", self.conf, "-path", self.plugins, "-cache", self.cache,
                            "-runtime", RUNTIME_NS, "-prefix", self.prefix, op, str(first), str(last + 1)],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise RuntimeError(f"{self.infra} {op} {first}..{last}: {r.stderr.strip()}")
        return json.loads(r.stdout), r.stderr

    def close(self):
        if self.applied:
            self.lab.destroy(self.infra)
        shutil.rmtree(self.lab.state, ignore_errors=True)


class Run:
    def __init__(self):
        self.work = tempfile.mkdtemp(prefix="cnisteps.")
        self.driver = os.path.join(self.work, "cnidriver")
        subprocess.run(["go", "build", "-o", self.driver, "./bench/cnidriver"], cwd=os.path.dirname(HERE), check=True)
        self.namespaces = []
        self.netns(RUNTIME_NS)

    def netns(self, ns):
        subprocess.run(["ip", "netns", "add", ns], check=True)
        self.namespaces.append(ns)

    def close(self):
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], check=False)
        shutil.rmtree(self.work, ignore_errors=True)


def phases(stderr):
    """The traced phases of each ADD in a batch's standard error, in order:
    one dict per ADD, from its first phase to "attach: apply"."""
    out, cur = [], {}
    for line in stderr.splitlines():
        m = TRACE.match(line)
        if not m:
            continue
        ms, what = float(m.group(1)), re.sub(r" \(.*\)$", "", m.group(2).strip())
        cur[what] = cur.get(what, 0) + ms
        if what == "attach: apply":
            out.append(cur)
            cur = {}
    return out


def measure(standing, probe, rounds):
    """Each build's ADD and DEL times and traced phases, rounds of probe."""
    got = {s.k: {"ADD": [], "DEL": [], "phases": collections.defaultdict(list)} for s in standing}
    first, last = standing[0].n + 1, standing[0].n + probe
    for rnd in range(rounds):
        turn = rnd % len(standing)
        for s in standing[turn:] + standing[:turn]:
            add, err = s.drive("add", first, last, trace=True)
            dele, _ = s.drive("del", first, last)
            got[s.k]["ADD"] += add["each_s"]
            got[s.k]["DEL"] += dele["each_s"]
            for p in phases(err):
                for what, ms in p.items():
                    got[s.k]["phases"][what].append(ms)
    return got


def report(n, builds, got, probe, rounds):
    print(f"\n{n} containers: medians of {rounds} rounds of {probe} ADDs and DELs (ms); later builds over the first")
    names = [os.path.basename(os.path.dirname(b)) + "/" + os.path.basename(b) for b in builds]
    print(f"{'':<44}" + "".join(f"{x[-16:]:>18}" for x in names) + "".join(f"{'/ first':>10}" for _ in builds[1:]))
    rows = [("ADD (through libcni)", lambda g: g["ADD"], 1e3), ("DEL (through libcni)", lambda g: g["DEL"], 1e3)]
    for what in got[0]["phases"]:
        rows.append((what, lambda g, w=what: g["phases"].get(w, []), 1))
    for label, f, scale in rows:
        v = [statistics.median(f(got[k])) * scale if f(got[k]) else float("nan") for k in range(len(builds))]
        print(f"{label[:43]:<44}" + "".join(f"{x:>16.1f}ms" for x in v) + "".join(f"{x / v[0]:>10.2f}" for x in v[1:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vnet", required=True, help="builds of vnet, separated by commas: the first is what the others are measured against")
    ap.add_argument("--sizes", default="100,1000", help="containers standing, separated by commas (at most 1,000 each)")
    ap.add_argument("--probe", type=int, default=10, help="containers added and deleted per round")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("cni_steps.py: needs root")
    builds = [os.path.abspath(b) for b in a.vnet.split(",")]
    sizes = [int(x) for x in a.sizes.split(",")]
    if not all(1 <= n <= 1000 for n in sizes) or a.probe < 1:
        sys.exit("cni_steps.py: --sizes 1..1000 each, --probe at least 1")
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    lock = open(LOCK, "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    run = Run()
    results = []
    try:
        lab = VnetLab(builds[0])
        print(lab.machine())
        shutil.rmtree(lab.state, ignore_errors=True)
        for b in builds:
            print(f"{b}: {subprocess.run([b, 'version'], capture_output=True, text=True).stdout.strip()}")
        print(f"load average at the start: {open('/proc/loadavg').read().split()[:3]}")
        for n in sizes:
            standing = [Standing(run, b, k, n) for k, b in enumerate(builds)]
            try:
                for s in standing:
                    s.set_up(a.probe)
                print(f"{n} containers standing for each build", file=sys.stderr)
                got = measure(standing, a.probe, a.rounds)
                results.append((n, [got[k] for k in range(len(builds))]))
            finally:
                for s in standing:
                    s.close()
    finally:
        run.close()
        fcntl.flock(lock, fcntl.LOCK_UN)
    print(f"load average at the end: {open('/proc/loadavg').read().split()[:3]}")
    for n, got in results:
        report(n, builds, got, a.probe, a.rounds)


if __name__ == "__main__":
    main()
