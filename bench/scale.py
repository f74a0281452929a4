#!/usr/bin/env python3
"""How vnet's commands grow with the size of an infrastructure, beside the
kernel's own cost for the same objects.

One host, one private switch with one port group, N VMs with one vNIC each.
For each N it times, as wall time of each command: vnet's first apply, a
no-op apply, a full no-op apply (`apply --full`), one-VM changes (add a VM,
change its address, remove it; the median over --changes of each), status
and destroy. Beside it, in the same run and under the same lock,
bench/rawnetlink issues the same netlink requests directly (namespaces,
veth pairs, bridge, addresses) for the same N and the same changes, and
deletes them. With --mininet, also in the same run and under the same lock,
bench/mininet_star.py builds the same star with Mininet's Python API (one
LinuxBridge, N hosts on plain veth Links, or with --mininet-tc TCLinks with
an HTB qdisc of 1 Gbit/s on each end, no controller) and times its build and start, the same one-host changes and its
stop. Then it prints each operation's cost per 100 VMs between the
smallest and the largest N (the slope), and the CPU time (user and
system) of each vnet command: vnet's own time, which other work on the
machine barely moves, where wall time is.

After each first apply (vnet's and raw netlink's) it waits, untimed, until
the kernel is quiet (system, irq and softirq time under 10% of the CPUs
for a second; at most --quiet seconds) and prints how long that took. N
guests coming up each send a few IPv6 frames (duplicate address detection,
MLD reports, router solicitations) that the bridge floods to every other
port: at 1,000 VMs some 8 million frames, which keep this 2-core machine
busy for tens of seconds after an apply that took a few, and would
otherwise be timed as part of the one-VM changes that follow.

usage: bench/scale.py [--vnet bin/vnet] [--sizes 100,300,1000] [--changes 20]
                      [--hosts 1] [--settle 0] [--quiet 120] [--profile]
                      [--cpuprofile DIR] [--api] [--mininet [--mininet-tc]]

--api also times the one-VM changes through a running `vnet server` on the
same state directory: a PUT of the spec to /api/v1/infras/NAME over a
kept-alive connection, the rows marked (api), beside the CLI's (a new
process each) and raw netlink's. bench/warm.py compares the two ways in
more detail.

--hosts H spreads the N VMs evenly over H hosts on one distributed switch
(one uplink, a NIC on each host); the one-VM changes happen on the first
host. bench/rawnetlink then still makes the N VMs on one host: its figure
leaves out the other hosts' namespaces and the uplinks.

Needs root and Go (it builds bench/rawnetlink); --mininet needs Mininet 2.3
for /usr/bin/python3 (Debian's `mininet`) and bridge-utils. It takes /tmp/vnet-kernel.lock
for each size itself (do not wrap it in flock) and removes what it made, also
when interrupted or terminated. --profile shows where a one-VM change's time
goes at the largest N: the engine's phases (VNET_TRACE) and, from one change
under strace, its namespace switches (setns), netlink messages and fsyncs.
--cpuprofile writes a CPU profile of each timed vnet command to DIR
(VNET_CPUPROFILE). Mininet's hosts are shells in namespaces of their own; after
each size it checks that none of this run's shells, bridge or ports is left and
removes any that is, by the run's tag (it never runs `mn -c`, which kills every
Mininet shell and deletes every link named like x-ethN).
--settle waits that many seconds before each timed
command, untimed, for the kernel to finish with new links.
Not a test: it prints measurements.
"""
import argparse, fcntl, http.client, json, os, platform, re, resource, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

LOCK = "/tmp/vnet-kernel.lock"
QUIET = 0.10  # kernel_busy below which the machine counts as quiet
HERE = os.path.dirname(os.path.abspath(__file__))


def ip(i):
    """The address of VM i (1-based), unique below 65,000 VMs; as bench/rawnetlink gives it."""
    return f"10.{100 + i // 65000}.{i // 250 % 256}.{i % 250 + 1}/8"


def host_of(i, n, hosts):
    """The host of VM i (1-based) of n spread evenly over `hosts` hosts; VMs past n go on h1."""
    return f"h{(i - 1) * hosts // n + 1}" if i <= n else "h1"


def spec(name, vms, hosts=1):
    """vms: list of (vm name, address, host). One host: a private switch on it; more: a
    distributed switch over all of them, one uplink on each host's NIC."""
    rows = "\n".join(f"  - {{name: {v}, host: {h}, nics: [{{portgroup: pg, ip: {a}}}]}}" for v, a, h in vms)
    if hosts == 1:
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
    hs = "\n".join(f"  - {{name: h{k}, nics: [{{name: nic0, speed: 10Gbit}}]}}" for k in range(1, hosts + 1))
    nics = ", ".join(f"h{k}: nic0" for k in range(1, hosts + 1))
    return f"""name: {name}
hosts:
{hs}
switches:
  - name: dvs0
    uplinks: [{{name: up0, nics: {{{nics}}}}}]
    portgroups: [{{name: pg}}]
vms:
{rows}
"""


def children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run(args, env=None):
    """Runs a command; returns its wall time, its CPU time (user and system, itself and
    its children) and its result."""
    t, c = time.monotonic(), children_cpu()
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    dt, dc = time.monotonic() - t, children_cpu() - c
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr or r.stdout}")
    return dt, dc, r


def kernel_busy(interval=1.0):
    """The share of all CPUs' time the kernel spent in system, irq and softirq work
    over interval seconds (/proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[2] + v[5] + v[6], sum(v)
    k0, t0 = sample()
    time.sleep(interval)
    k1, t1 = sample()
    return (k1 - k0) / max(t1 - t0, 1)


def wait_quiet(limit, what):
    """Waits until the kernel is done with what N new guests do at start (each
    vNIC's IPv6 duplicate address detection, MLD reports and router
    solicitations, which the bridge floods to every other port: about N*N*8
    frames), so that the one-VM changes after it are not timed against it.
    Returns the seconds waited; gives up after limit."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if kernel_busy() < QUIET:
            return time.monotonic() - start
    print(f"scale.py: the kernel was still busy {limit:.0f} s after {what}; timing anyway", file=sys.stderr)
    return time.monotonic() - start


class Vnet:
    def __init__(self, vnet, name, cpuprofile, settle, trace, hosts=1, quiet=0):
        self.vnet, self.name, self.cpuprofile, self.settle, self.trace = vnet, name, cpuprofile, settle, trace
        self.quiet, self.waited = quiet, 0
        self.hosts = hosts
        self.state = tempfile.mkdtemp(prefix="vnet-scale.")
        self.file = os.path.join(self.state, "spec.yaml")
        self.n = 0
        self.phases = {}  # label -> [ms] from VNET_TRACE, of the one-VM changes
        self.cpu = {}  # label -> [s] of CPU time (user and system) of each command

    def timed(self, label, *args, wrap=()):
        env = dict(os.environ)
        if self.cpuprofile:
            self.n += 1
            env["VNET_CPUPROFILE"] = os.path.join(self.cpuprofile, f"{self.name}-{self.n:03d}-{label}.pprof")
        if self.trace:
            env["VNET_TRACE"] = "1"
        time.sleep(self.settle)
        dt, dc, r = run([*wrap, self.vnet, "--state-dir", self.state, *args], env)
        self.cpu.setdefault(label, []).append(dc)
        if self.trace and label in ("add", "change", "remove"):
            for m in re.finditer(r"^\s*([\d.]+) ms  (\w[\w ]*?)(?: \(.*\))?$", r.stderr, re.M):
                self.phases.setdefault(m.group(2), []).append(float(m.group(1)))
        return dt

    def apply(self, label, vms, *flags, wrap=()):
        with open(self.file, "w") as f:
            f.write(spec(self.name, vms, self.hosts))
        return self.timed(label, "apply", *flags, self.file, wrap=wrap)

    def cleanup(self):
        subprocess.run([self.vnet, "--state-dir", self.state, "destroy", self.name], capture_output=True)
        shutil.rmtree(self.state, ignore_errors=True)


class Raw:
    def __init__(self, exe, tag, quiet=0, flags=()):
        self.exe, self.tag, self.flags = exe, tag, list(flags)
        self.quiet, self.waited = quiet, 0

    def timed(self, *args):
        return run([self.exe, "-tag", self.tag, *self.flags, *args])[0]

    def cleanup(self):
        subprocess.run([self.exe, "-tag", self.tag, "down"], capture_output=True)


class Mininet:
    """bench/mininet_star.py under the system python3, which has Debian's mininet."""
    PYTHON = "/usr/bin/python3"

    def __init__(self, tag, tc):
        self.tag, self.tc = tag, tc

    def measure(self, n, changes):
        args = [self.PYTHON, os.path.join(HERE, "mininet_star.py"), "--tag", self.tag,
                "--n", str(n), "--changes", str(changes)] + (["--tc"] if self.tc else [])
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # Bounded, so that a Mininet stuck in its set-up does not keep the kernel lock.
            out, err = p.communicate(timeout=300 + n)
        except BaseException:
            # Let it stop its network itself; subprocess.run would SIGKILL it.
            p.terminate()
            try:
                p.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            raise
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {err or out}")
        return json.loads(out.strip().splitlines()[-1])

    def cleanup(self):
        """Removes what of this run is left: its hosts' shells (their namespaces go with
        them), its bridge and the bridge's ports, matched by the run's own tag only."""
        mine = re.compile(r"mininet:" + self.tag + r"[hs]\d*$")
        for pid in (d for d in os.listdir("/proc") if d.isdigit()):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if any(mine.match(x.decode(errors="replace")) for x in argv):
                print(f"mininet: killing a leftover shell {pid}", file=sys.stderr)
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        for line in links.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name == self.tag + "s" or name.startswith(self.tag + "s-eth"):
                print(f"mininet: deleting a leftover link {name}", file=sys.stderr)
                subprocess.run(["ip", "link", "del", name], capture_output=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A vnet server on a state directory, and a kept-alive connection to its API."""

    def __init__(self, vnet, state, cpuprofile, trace):
        self.port = free_port()
        env = dict(os.environ)
        if cpuprofile:
            env["VNET_CPUPROFILE"] = cpuprofile
        if trace:
            env["VNET_TRACE"] = "1"
        self.log = open(os.path.join(state, "server.log"), "w+")
        self.p = subprocess.Popen([vnet, "--state-dir", state, "server", "--no-etcd",
                                   "--listen", f"127.0.0.1:{self.port}"],
                                  stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.url = f"http://127.0.0.1:{self.port}"
        token_file = os.path.join(state, "api.token")
        deadline = time.monotonic() + 30
        while True:
            try:
                with open(token_file) as f:
                    self.token = f.readline().strip().split(":", 1)[-1]
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("vnet server did not start: " + self.output())
                time.sleep(0.1)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        self.calls = []  # each request's method, path and wall time, in order
        self.port_from = None  # the connection's own port, which the server's log names

    def put(self, name, body):
        """PUTs a spec; returns the wall time of the request and its answer."""
        return self.call("PUT", f"/api/v1/infras/{name}", body)

    def call(self, method, path, body=None, ok=(200,)):
        """Makes a request; returns its wall time and its answer (JSON, or
        the status when it is one of ok but not 200)."""
        headers = {"Authorization": "Bearer " + self.token}
        if body is not None:
            headers["Content-Type"] = "application/yaml"
        t = time.monotonic()
        self.conn.request(method, path, body=body, headers=headers)
        r = self.conn.getresponse()
        data = r.read()
        dt = time.monotonic() - t
        self.calls.append((method, path, dt))
        self.port_from = self.conn.sock.getsockname()[1] if self.conn.sock else self.port_from
        if r.status not in ok:
            raise RuntimeError(f"{method} {path}: {r.status} {data.decode(errors='replace')}")
        return dt, json.loads(data) if r.status == 200 else r.status

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        self.conn.close()
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def ops_of(changes, add, change, remove):
    """Runs `changes` rounds of add, change address, remove; returns the medians."""
    a, c, r = [], [], []
    for k in range(changes):
        a.append(add(k))
        c.append(change(k))
        r.append(remove(k))
    return {"add one VM": statistics.median(a), "change one address": statistics.median(c),
            "remove one VM": statistics.median(r)}


def measure_vnet(v, n, changes, profile, api=False):
    vms = [(f"vm{i}", ip(i), host_of(i, n, v.hosts)) for i in range(1, n + 1)]
    extra = f"vm{n + 1}"
    out = {"first apply": v.apply("first", vms)}
    v.waited = wait_quiet(v.quiet, f"vnet's first apply of {n} VMs")
    out["no-op apply"] = statistics.median(v.apply("noop", vms) for _ in range(3))
    out["no-op apply --full"] = statistics.median(v.apply("full", vms, "--full") for _ in range(3))
    out.update(ops_of(changes,
                      lambda k: v.apply("add", vms + [(extra, ip(n + 1), "h1")]),
                      lambda k: v.apply("change", vms + [(extra, ip(n + 2 + k), "h1")]),
                      lambda k: v.apply("remove", vms)))
    if api:
        out.update(measure_api(v, vms, extra, n, changes))
    out["status"] = statistics.median(v.timed("status", "status", v.name) for _ in range(3))
    if profile:
        out["syscalls"] = strace_change(v, vms, extra, n)
    out["destroy"] = v.timed("destroy", "destroy", v.name)
    return out


def measure_api(v, vms, extra, n, changes):
    """The same one-VM changes through a running vnet server's API (a PUT of
    the spec over a kept-alive connection) on the same state directory."""
    srv = Server(v.vnet, v.state, None, False)
    try:
        def put(vm_list):
            return srv.put(v.name, spec(v.name, vm_list, v.hosts))[0]
        put(vms)  # the server's first request reads what it keeps
        ops = ops_of(changes,
                     lambda k: put(vms + [(extra, ip(n + 1), "h1")]),
                     lambda k: put(vms + [(extra, ip(n + 2 + k), "h1")]),
                     lambda k: put(vms))
    finally:
        srv.stop()
    return {op + " (api)": t for op, t in ops.items()}


def strace_change(v, vms, extra, n):
    """Counts the syscalls of one added VM: namespace switches, netlink messages, fsyncs."""
    path = os.path.join(v.state, "strace.txt")
    v.apply("add", vms + [(extra, ip(n + 1), "h1")], wrap=("strace", "-f", "-c", "-o", path))
    v.apply("remove", vms)
    counts = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[-1] in ("setns", "sendto", "sendmsg", "recvfrom", "recvmsg", "fsync", "fdatasync"):
                counts[parts[-1]] = int(parts[3])
    return counts


def measure_raw(r, n, changes):
    out = {"first apply": r.timed("up", str(n))}
    r.waited = wait_quiet(r.quiet, f"raw netlink's {n} VMs")
    i = n + 1
    out.update(ops_of(changes,
                      lambda k: r.timed("add", str(i), ip(i)),
                      lambda k: r.timed("addr", str(i), ip(n + 2 + k)),
                      lambda k: r.timed("rm", str(i))))
    out["destroy"] = r.timed("down")
    return out


def build_raw():
    exe = os.path.join(tempfile.mkdtemp(prefix="rawnetlink."), "rawnetlink")
    subprocess.run(["go", "build", "-o", exe, "./bench/rawnetlink"], cwd=os.path.dirname(HERE), check=True)
    return exe


def terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vnet", default="bin/vnet")
    ap.add_argument("--sizes", default="100,300,1000")
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--settle", type=float, default=0)
    ap.add_argument("--quiet", type=float, default=120,
                    help="seconds to wait at most, after each first apply, for the kernel to be quiet")
    ap.add_argument("--hosts", type=int, default=1, help="hosts the N VMs are spread over, on one distributed switch")
    ap.add_argument("--profile", action="store_true", help="where a one-VM change's time goes")
    ap.add_argument("--cpuprofile", help="directory for CPU profiles")
    ap.add_argument("--api", action="store_true", help="also the one-VM changes through a running vnet server's API")
    ap.add_argument("--mininet", action="store_true", help="also Mininet (bench/mininet_star.py) for each size")
    ap.add_argument("--mininet-tc", action="store_true", help="Mininet with TCLink, bw=1000 (HTB), instead of Link")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("scale.py: needs root")
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    vnet = os.path.abspath(a.vnet)
    if a.cpuprofile:
        os.makedirs(a.cpuprofile, exist_ok=True)
    raw_exe = build_raw()
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.hosts > 1:
        print(f"{a.hosts} hosts on one distributed switch, the VMs spread evenly, the one-VM changes on h1; "
              "raw netlink makes the same VMs on one host (no host namespaces for the others, no uplinks)")
    print(f"machine: {os.cpu_count()} CPUs, Linux {platform.release()}; vnet {run([vnet, '--version'])[2].stdout.strip()}")
    if a.mininet:
        v = subprocess.run([Mininet.PYTHON, "-c", "import mininet.net as m; print(m.VERSION)"],
                           capture_output=True, text=True)
        if v.returncode != 0:
            sys.exit(f"scale.py: --mininet needs mininet for {Mininet.PYTHON} (apt-get install mininet): {v.stderr}")
        print(f"mininet {v.stdout.strip()}: LinuxBridge, {'TCLink bw=1000' if a.mininet_tc else 'Link'}, no controller")
    results, raws, mns, phases, cpus = {}, {}, {}, {}, {}
    for n in sizes:
        tag = f"s{os.getpid() % 100000}n{n}"
        v = Vnet(vnet, "scl" + tag, a.cpuprofile, a.settle, a.profile and n == sizes[-1], a.hosts, a.quiet)
        r = Raw(raw_exe, tag, a.quiet)
        m = Mininet(f"m{os.getpid() % 10000:04d}", a.mininet_tc) if a.mininet else None
        with open(LOCK, "a") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            try:
                results[n] = measure_vnet(v, n, a.changes, a.profile and n == sizes[-1], a.api)
                raws[n] = measure_raw(r, n, a.changes)
                for op in list(raws[n]):  # the API's rows beside the same raw figures
                    if op + " (api)" in results[n]:
                        raws[n][op + " (api)"] = raws[n][op]
                if m:
                    mns[n] = m.measure(n, a.changes)
            finally:
                v.cleanup()
                r.cleanup()
                if m:
                    m.cleanup()
                fcntl.flock(lk, fcntl.LOCK_UN)
        phases[n] = v.phases
        cpus[n] = {op: statistics.median(v.cpu[label]) for op, label in CPU_OPS if label in v.cpu}
        print(f"N={n}: waited for a quiet kernel after the first apply: vnet {v.waited:.1f} s, raw netlink {r.waited:.1f} s")
        print(f"N={n}: vnet " + ", ".join(f"{k} {x:.3f}s" for k, x in results[n].items() if k != "syscalls")
              + "; raw netlink " + ", ".join(f"{k} {x:.3f}s" for k, x in raws[n].items())
              + ("; mininet " + ", ".join(f"{k} {x:.3f}s" for k, x in mns[n].items()) if m else ""), flush=True)
    shutil.rmtree(os.path.dirname(raw_exe), ignore_errors=True)
    report(sizes, results, raws, mns)
    report_cpu(sizes, cpus)
    if a.profile:
        profile(sizes[-1], results[sizes[-1]].get("syscalls", {}), phases[sizes[-1]])


def report(sizes, results, raws, mns):
    """A column per tool and size, and each tool's ratio to raw netlink (vnet's, and with Mininet its);
    with two sizes or more, each tool's cost per 100 VMs between the smallest and largest."""
    lo, hi = sizes[0], sizes[-1]
    tools = [("vnet", results), ("raw", raws)] + ([("mininet", mns)] if mns else [])
    head = f"{'operation':<26}" + "".join(f"{t + ' N=' + str(n):>15}" for n in sizes for t, _ in tools)
    ratios = ("vnet", "mn") if mns else ("vnet",)
    head += "".join(f"{t + '/raw N=' + str(n):>16}" for n in sizes for t in ratios)
    if len(sizes) > 1:
        head += "".join(f"{t + '/100 VMs':>17}" for t, _ in tools)
    print("\n" + head)
    for op in (k for k in results[lo] if k != "syscalls"):
        row = f"{op:<26}"
        for n in sizes:
            row += "".join(f"{d[n][op]:>14.3f}s" if op in d[n] else f"{'-':>15}" for _, d in tools)
        for n in sizes:
            for d in (results, mns)[:len(ratios)]:
                ok = op in d[n] and op in raws[n] and raws[n][op] > 0
                row += f"{d[n][op] / raws[n][op]:>15.1f}x" if ok else f"{'-':>16}"
        if len(sizes) > 1:
            for _, d in tools:
                row += f"{(d[hi][op] - d[lo][op]) / (hi - lo) * 100:>16.3f}s" if op in d[hi] else f"{'-':>17}"
        print(row)


# The operations whose CPU time is reported, and the label of their commands.
CPU_OPS = [("first apply", "first"), ("no-op apply", "noop"), ("no-op apply --full", "full"),
           ("add one VM", "add"), ("change one address", "change"), ("remove one VM", "remove"),
           ("status", "status"), ("destroy", "destroy")]


def report_cpu(sizes, cpus):
    """vnet's own time: the CPU time (user and system) of each command, medians as above;
    unlike wall time, what else the machine does barely moves it."""
    print("\nCPU time of vnet's command (user + system)")
    print(f"{'operation':<20}" + "".join(f"{'vnet N=' + str(n):>15}" for n in sizes))
    for op, _ in CPU_OPS:
        print(f"{op:<20}" + "".join(f"{cpus[n][op]:>14.3f}s" if op in cpus[n] else f"{'-':>15}" for n in sizes))


def profile(n, syscalls, phases):
    print(f"\nwhere a one-VM change goes at N={n} (median ms of each engine phase over the changes, VNET_TRACE):")
    for label, ms in phases.items():
        print(f"  {label:<20}{statistics.median(ms):>8.1f} ms")
    print("syscalls of one added VM (strace -f -c): " + ", ".join(f"{k} {v}" for k, v in sorted(syscalls.items())))


if __name__ == "__main__":
    main()
