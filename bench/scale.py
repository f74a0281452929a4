#!/usr/bin/env python3
"""How vnet's commands grow with the size of an infrastructure.

One host, one private switch with one port group, N VMs with one vNIC each.
For each N it times, as wall time of the vnet command: the first apply, a
no-op apply, adding one VM, changing one VM's address, removing that VM
(each the median over --reps changes), status, and destroy. Then it prints
each operation's cost per 100 VMs between the smallest and the largest N.

usage: bench/scale.py [--vnet bin/vnet] [--sizes 100,500] [--reps 5] [--settle 0] [--profile DIR]

Needs root. It takes /tmp/vnet-kernel.lock for each size itself (do not wrap
it in flock) and destroys what it made, also when interrupted. --profile
writes a CPU profile of each timed command to DIR (VNET_CPUPROFILE).
--settle waits that many seconds before each timed command, untimed, for
the kernel to finish with new links (IPv6 duplicate address detection).
Not a test: it prints measurements.
"""
import argparse, fcntl, os, platform, shutil, statistics, subprocess, sys, tempfile, time

LOCK = "/tmp/vnet-kernel.lock"


def ip(i):
    """The address of VM i (1-based), unique below 65,000 VMs."""
    return f"10.{100 + i // 65000}.{i // 250 % 256}.{i % 250 + 1}/8"


def spec(name, vms):
    """vms: list of (vm name, address)."""
    rows = "\n".join(f"  - {{name: {v}, host: h1, nics: [{{portgroup: pg, ip: {a}}}]}}" for v, a in vms)
    return f"""name: {name}
hosts:
  - name: h1
switches:
  - name: sw0
    hosts: [h1]
    portgroups: [{{name: pg}}]
vms:
{rows}
"""


class Run:
    def __init__(self, vnet, name, profile, settle):
        self.vnet, self.name, self.profile, self.settle = vnet, name, profile, settle
        self.state = tempfile.mkdtemp(prefix="vnet-scale.")
        self.file = os.path.join(self.state, "spec.yaml")
        self.n = 0

    def timed(self, label, *args):
        env = dict(os.environ)
        if self.profile:
            self.n += 1
            env["VNET_CPUPROFILE"] = os.path.join(self.profile, f"{self.name}-{self.n:03d}-{label}.pprof")
        time.sleep(self.settle)
        t = time.monotonic()
        r = subprocess.run([self.vnet, "--state-dir", self.state, *args], capture_output=True, text=True, env=env)
        dt = time.monotonic() - t
        if r.returncode != 0:
            raise RuntimeError(f"vnet {' '.join(args)}: {r.stderr or r.stdout}")
        return dt

    def apply(self, label, vms):
        with open(self.file, "w") as f:
            f.write(spec(self.name, vms))
        return self.timed(label, "apply", self.file)

    def cleanup(self):
        subprocess.run([self.vnet, "--state-dir", self.state, "destroy", self.name], capture_output=True)
        shutil.rmtree(self.state, ignore_errors=True)


def measure(vnet, n, reps, profile, settle):
    name = f"scl{os.getpid() % 100000}n{n}"
    vms = [(f"vm{i}", ip(i)) for i in range(1, n + 1)]
    r = Run(vnet, name, profile, settle)
    out = {}
    try:
        out["first apply"] = r.apply("first", vms)
        out["no-op apply"] = statistics.median(r.apply("noop", vms) for _ in range(reps))
        add, change, remove = [], [], []
        extra = (f"vm{n + 1}", ip(n + 1))
        for k in range(reps):
            add.append(r.apply("add", vms + [extra]))
            moved = (extra[0], ip(n + 2 + k))
            change.append(r.apply("change", vms + [moved]))
            remove.append(r.apply("remove", vms))
        out["add one VM"] = statistics.median(add)
        out["change one address"] = statistics.median(change)
        out["remove one VM"] = statistics.median(remove)
        out["status"] = statistics.median(r.timed("status", "status", name) for _ in range(reps))
        out["destroy"] = r.timed("destroy", "destroy", name)
    finally:
        r.cleanup()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vnet", default="bin/vnet")
    ap.add_argument("--sizes", default="100,500")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--settle", type=float, default=0)
    ap.add_argument("--profile", help="directory for CPU profiles")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("scale.py: needs root")
    vnet = os.path.abspath(a.vnet)
    if a.profile:
        os.makedirs(a.profile, exist_ok=True)
    sizes = [int(s) for s in a.sizes.split(",")]
    print(f"machine: {os.cpu_count()} CPUs, Linux {platform.release()}; vnet {subprocess.run([vnet, '--version'], capture_output=True, text=True).stdout.strip()}")
    results = {}
    for n in sizes:
        with open(LOCK, "a") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            try:
                results[n] = measure(vnet, n, a.reps, a.profile, a.settle)
            finally:
                fcntl.flock(lk, fcntl.LOCK_UN)
        print(f"N={n}: " + ", ".join(f"{k} {v:.3f}s" for k, v in results[n].items()), flush=True)
    ops = list(results[sizes[0]])
    head = f"{'operation':<20}" + "".join(f"{'N=' + str(n):>10}" for n in sizes)
    if len(sizes) > 1:
        head += f"{'per 100 VMs':>13}"
    print("\n" + head)
    for op in ops:
        row = f"{op:<20}" + "".join(f"{results[n][op]:>9.3f}s" for n in sizes)
        if len(sizes) > 1:
            lo, hi = sizes[0], sizes[-1]
            row += f"{(results[hi][op] - results[lo][op]) / (hi - lo) * 100:>12.3f}s"
        print(row)


if __name__ == "__main__":
    main()
