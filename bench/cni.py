#!/usr/bin/env python3
"""Containers through CNI: vnet-cni, alone and through a vnet server, beside Debian's bridge plugin.

A runtime's view of a CNI plugin's cost: containers added per second one at
a time and ten at once, deleted per second the same two ways, and the time
of each ADD as containers pile up, up to the N-th (1,000 by default). Both
plugins are driven by bench/cnidriver, which calls libcni as a container
runtime does (libcni forks the plugin, which forks its IPAM plugin), and
both run in one runtime namespace made for the run, so the bridge plugin's
bridge and host-side veths stay out of the machine's own namespace. Every
container is a namespace made beforehand in /run/netns, as runtimes make
them before ADD; making it is not timed.

  vnet     vnet-cni (the vnet-cni binary beside --vnet, as make build puts
           it; a build without one: vnet under that name) on a port group
           of a one-host infrastructure (a 1 Gbit
           uplink, the default port security), addresses from vnet's IPAM
           ("ipam": {"type": "vnet"}) out of the port group's /16: each
           container a VM, its vNIC a port of the host's switch; each
           command a new process that opens the state store itself
  vnet-server  the same on an infrastructure of its own, its configuration
           naming a vnet server ("server": its URL) that the run starts
           over that infrastructure's state directory: each command a
           request to a process that keeps the spec and the kernel's
           handles between commands
  bridge   Debian's bridge plugin (containernetworking-plugins) with
           host-local IPAM out of a /16, isGateway: a Linux bridge in the
           runtime namespace and a veth pair per container: what a plain
           podman network or a simple cluster's pods get

Phases, each run for every plugin in turn before the next phase, --rounds
times, the plugins' order turning from round to round (figures: medians):
  ADD 1      --batch containers added one at a time
  DEL 1      the same deleted one at a time
  ADD 10     --batch containers added ten at once (ten commands in flight)
  DEL 10     the same deleted ten at once
Then the pile-up: --fill containers added one at a time, in chunks of 100
taking turns between the plugins, each ADD timed; printed: the first ADD's
time, the --fill-th's, and the medians of the first and the last ten; then
all of them deleted one at a time (DEL at N). Every ratio printed is
vnet's figure over bridge's, and vnet-server's over bridge's and over
vnet's: above 1, a rate is higher or a time longer.

With --baseline BIN, a second build of vnet (an older one, to measure a
change) runs in every phase as two more plugins, alone ("baseline") and
through a server of its own ("baseline-server"), each on an
infrastructure and in a state directory of its own, with its own
containers; the ratios then include vnet's over the baseline's and
vnet-server's over baseline-server's.

--only LIST runs only the plugins named (vnet-server,baseline-server: the
server's path beside the build before, in a fraction of the time;
vnet-server,bridge: the server's growth beside the kernel's).

--server-logs DIR keeps each server's log (its standard output and error)
in DIR as PLUGIN.log: with VNET_TRACE=1 in the environment, which the
servers inherit, the laps of every change they made, in order, so that a
phase's growth with the containers can be read ADD by ADD.

usage: bench/cni.py [--vnet bin/vnet] [--baseline OLD] [--batch 50] [--rounds 3] [--fill 1000] [--only LIST] [--server-logs DIR] [--lock-held]
Needs root, Go (it builds bench/cnidriver) and containernetworking-plugins.
It takes /tmp/vnet-kernel.lock for the whole run itself (do not wrap it in
flock), unless --lock-held says its caller holds it already. Not a test: it
prints measurements and ratios.
"""
import argparse, fcntl, json, os, shutil, signal, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vnetlab import VnetLab  # noqa: E402

LOCK = "/tmp/vnet-kernel.lock"
PREFIX = "cnib"
DEBIAN = "/usr/lib/cni"
RUNTIME_NS = f"{PREFIX}-rt"
INFRA = f"{PREFIX}vnet"
BASE_INFRA = f"{PREFIX}base"
SERVER_INFRA = f"{PREFIX}srv"
SERVER_BASE_INFRA = f"{PREFIX}srvb"
SERVER_PORT = 18471  # in the runtime namespace, where the plugins run
SERVER_BASE_PORT = 18472
SERVER_TOKEN = "cni-bench-" + "0" * 24
PLUGINS = ("vnet", "vnet-server", "bridge")
WITH_BASELINE = ("vnet", "baseline", "vnet-server", "baseline-server", "bridge")
# The plugins that go through a server: its infrastructure and port.
SERVERS = {"vnet-server": (SERVER_INFRA, SERVER_PORT), "baseline-server": (SERVER_BASE_INFRA, SERVER_BASE_PORT)}
HERE = os.path.dirname(os.path.abspath(__file__))


def spec(infra=INFRA):
    return f"""name: {infra}
hosts:
  - {{name: esx1, nics: [{{name: vmnic0, speed: 1Gbit}}]}}
switches:
  - name: dvs0
    uplinks: [{{name: u1, nics: {{esx1: vmnic0}}}}]
    portgroups:
      - {{name: pg-bench, subnet: 10.62.0.0/16, gateway: 10.62.0.1}}
"""


def conflist(plugin, state, work):
    if plugin in ("vnet", "baseline"):
        infra = INFRA if plugin == "vnet" else BASE_INFRA
        p = {"type": "vnet-cni", "infra": infra, "portgroup": "pg-bench", "stateDir": state, "ipam": {"type": "vnet"}}
    elif plugin in SERVERS:
        infra, port = SERVERS[plugin]
        p = {"type": "vnet-cni", "infra": infra, "portgroup": "pg-bench", "server": f"http://127.0.0.1:{port}",
             "serverTokenFile": os.path.join(work, "server.token"), "ipam": {"type": "vnet"}}
    else:
        p = {"type": "bridge", "bridge": "cnibench0", "isGateway": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.63.0.0/16"}]], "dataDir": os.path.join(work, "ipam")}}
    return {"cniVersion": "1.0.0", "name": f"bench{plugin}", "plugins": [p]}


class Bench(VnetLab):
    """The runtime namespace, vnet's infrastructure (and the baseline's),
    each plugin's container namespaces and configuration list, and the
    driver."""

    def __init__(self, vnet, most, baseline=None):
        super().__init__(vnet)
        self.work = tempfile.mkdtemp(prefix="cnibench.")
        self.driver = os.path.join(self.work, "cnidriver")
        subprocess.run(["go", "build", "-o", self.driver, "./bench/cnidriver"], cwd=os.path.dirname(HERE), check=True)
        self.plugins = PLUGINS if baseline is None else WITH_BASELINE
        # Each build's plugin (its vnet-cni binary, or vnet itself for a
        # build without one) answers as vnet-cni from a directory of its
        # own, ahead of Debian's plugins.
        self.builds = {"vnet": self}
        if baseline is not None:
            self.builds["baseline"] = VnetLab(baseline)
        # Each server's infrastructure has a state directory of its own,
        # which only that server writes once it runs.
        self.served = {"vnet-server": VnetLab(vnet)}
        if baseline is not None:
            self.served["baseline-server"] = VnetLab(baseline)
        self.servers = {}
        self.plugin_dirs = {}
        for plugin, lab in self.builds.items():
            d = self.plugin_dirs[plugin] = os.path.join(self.work, f"plugins-{plugin}")
            os.makedirs(d)
            os.symlink(lab.cni_plugin(), os.path.join(d, "vnet-cni"))
        self.plugin_dirs["bridge"] = self.plugin_dirs["vnet-server"] = self.plugin_dirs["vnet"]
        if baseline is not None:
            self.plugin_dirs["baseline-server"] = self.plugin_dirs["baseline"]
        self.most, self.namespaces, self.applied = most, [], []

    def set_up(self):
        self.netns(RUNTIME_NS)
        for plugin, lab in self.builds.items():
            infra = INFRA if plugin == "vnet" else BASE_INFRA
            lab.apply(spec(infra))
            self.applied.append((lab, infra))
        for plugin, lab in self.served.items():
            infra, port = SERVERS[plugin]
            lab.apply(spec(infra))
            self.applied.append((lab, infra))
            self.start_server(plugin, lab, port)
        for plugin in self.plugins:
            state = self.builds[plugin].state if plugin in self.builds else self.state
            with open(self.conf(plugin), "w") as f:
                json.dump(conflist(plugin, state, self.work), f)
            os.makedirs(self.cache(plugin))
            for i in range(1, self.most + 1):
                self.netns(f"{PREFIX}-{plugin}-{i}")

    def start_server(self, plugin, lab, port):
        """plugin's vnet server (lab's build) over lab's state directory,
        in the runtime namespace (whose loopback it listens on, where the
        plugins run), until close; it answers once /healthz does."""
        subprocess.run(["ip", "-n", RUNTIME_NS, "link", "set", "lo", "up"], check=True)
        tokens = os.path.join(self.work, "server.token")
        with open(tokens, "w") as f:
            f.write(f"bench:{SERVER_TOKEN}\n")
        os.chmod(tokens, 0o600)
        log = os.path.join(self.work, f"{plugin}.log")
        with open(log, "w") as out:
            server = self.servers[plugin] = subprocess.Popen(
                ["ip", "netns", "exec", RUNTIME_NS, lab.vnet, "--state-dir", lab.state, "server",
                 "--no-etcd", "--listen", f"127.0.0.1:{port}", "--token-file", tokens], stdout=out, stderr=subprocess.STDOUT)
        for _ in range(300):
            r = subprocess.run(["ip", "netns", "exec", RUNTIME_NS, "python3", "-c",
                                f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/healthz', timeout=1)"],
                               capture_output=True)
            if r.returncode == 0:
                return
            if server.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"{plugin}'s vnet server does not answer: " + open(log).read())

    def stop_servers(self):
        for server in self.servers.values():
            if server.poll() is None:
                server.terminate()
                try:
                    server.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()

    def conf(self, plugin):
        return os.path.join(self.work, f"{plugin}.conflist")

    def cache(self, plugin):
        return os.path.join(self.work, f"cache-{plugin}")

    def netns(self, ns):
        subprocess.run(["ip", "netns", "add", ns], check=True)
        self.namespaces.append(ns)

    def drive(self, plugin, op, first, last, workers=1):
        """op for containers first..last of plugin; the driver's report."""
        r = subprocess.run([self.driver, "-conf", self.conf(plugin), "-path", f"{self.plugin_dirs[plugin]}:{DEBIAN}",
                            "-cache", self.cache(plugin), "-runtime", RUNTIME_NS, "-prefix", f"{PREFIX}-{plugin}",
                            "-workers", str(workers), op, str(first), str(last + 1)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{plugin} {op} {first}..{last}: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def keep_logs(self, into):
        """Each server's log, the server stopped, copied into the directory into."""
        self.stop_servers()
        os.makedirs(into, exist_ok=True)
        for plugin in self.servers:
            shutil.copy(os.path.join(self.work, f"{plugin}.log"), os.path.join(into, f"{plugin}.log"))

    def close(self):
        self.stop_servers()  # each the one writer of its store: stopped before its infrastructure is destroyed
        for lab, infra in self.applied:
            lab.destroy(infra)
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], check=False)
        shutil.rmtree(self.work, ignore_errors=True)
        for lab in list(self.builds.values()) + list(self.served.values()):
            shutil.rmtree(lab.state, ignore_errors=True)


def rates(b, batch, rounds):
    """The four rate phases, each plugin in turn, the order turning each round."""
    phases = [("ADD 1", "add", 1), ("DEL 1", "del", 1), ("ADD 10", "add", 10), ("DEL 10", "del", 10)]
    plugins = b.plugins
    got = {p: {name: [] for name, _, _ in phases} for p in plugins}
    for rnd in range(rounds):
        turn = rnd % len(plugins)
        order = plugins[turn:] + plugins[:turn]
        for name, op, workers in phases:
            for p in order:
                r = b.drive(p, op, 1, batch, workers)
                got[p][name].append(r["count"] / r["wall_s"])
        print(f"round {rnd + 1}/{rounds} done", file=sys.stderr)
    return {p: {k: statistics.median(v) for k, v in got[p].items()} for p in plugins}, got


def pile_up(b, fill):
    """fill containers added one at a time in chunks taking turns, then
    all deleted one at a time: each ADD's time, and the DELs' rate."""
    each = {p: [] for p in b.plugins}
    for first in range(1, fill + 1, 100):
        last = min(first + 99, fill)
        for p in b.plugins:
            each[p] += b.drive(p, "add", first, last)["each_s"]
        print(f"{last}/{fill} added", file=sys.stderr)
    dels = {}
    for p in b.plugins:
        r = b.drive(p, "del", 1, fill)
        dels[p] = r["count"] / r["wall_s"]
    return each, dels


def terminate(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vnet", default="bin/vnet")
    ap.add_argument("--baseline", help="another build of vnet, measured beside --vnet in every phase")
    ap.add_argument("--batch", type=int, default=50, help="containers per rate phase")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fill", type=int, default=1000, help="containers of the pile-up (at most 1,000: a Linux bridge takes 1,024 ports)")
    ap.add_argument("--lock-held", action="store_true", help=f"the caller holds {LOCK} already: do not take it")
    ap.add_argument("--only", help="run only these plugins, comma-separated (vnet-server,baseline-server: the server path"
                                   " alone, in a fraction of the time)")
    ap.add_argument("--server-logs", metavar="DIR", help="keep each server's log in DIR (with VNET_TRACE=1: its laps)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("cni.py: needs root")
    for p in ("bridge", "host-local"):
        if not os.path.exists(os.path.join(DEBIAN, p)):
            sys.exit(f"cni.py: {DEBIAN}/{p} missing: apt-get install containernetworking-plugins")
    if not 1 <= a.fill <= 1000 or a.batch < 10:
        sys.exit("cni.py: --fill 1..1000, --batch at least 10")
    every = PLUGINS if a.baseline is None else WITH_BASELINE
    if a.only and (unknown := set(a.only.split(",")) - set(every)):
        sys.exit(f"cni.py: --only: no plugin {', '.join(sorted(unknown))} in this run ({', '.join(every)})")
    # SIGTERM and SIGHUP end the run through the clean-up, as ^C does.
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    vnet = os.path.abspath(a.vnet)
    lock = open(LOCK, "w")
    if not a.lock_held:
        fcntl.flock(lock, fcntl.LOCK_EX)
    baseline = os.path.abspath(a.baseline) if a.baseline else None
    b = Bench(vnet, max(a.batch, a.fill), baseline)
    if a.only:
        b.plugins = tuple(p for p in b.plugins if p in a.only.split(","))
    try:
        print(b.machine())
        version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "containernetworking-plugins"],
                                 capture_output=True, text=True).stdout
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True).stdout.strip()
        print(f"{subprocess.run([vnet, 'version'], capture_output=True, text=True).stdout.strip()}, tree at {commit or '?'};"
              f" containernetworking-plugins {version or '(not from a Debian package)'}")
        if baseline:
            print(f"baseline: {baseline}, {subprocess.run([baseline, 'version'], capture_output=True, text=True).stdout.strip()}")
        print(f"load average at the start: {open('/proc/loadavg').read().split()[:3]}")
        b.set_up()
        med, got = rates(b, a.batch, a.rounds)
        each, dels = pile_up(b, a.fill)
    finally:
        if a.server_logs:
            b.keep_logs(a.server_logs)
        b.close()
        fcntl.flock(lock, fcntl.LOCK_UN)
    print(f"load average at the end: {open('/proc/loadavg').read().split()[:3]}")
    report(a, med, got, each, dels)


def report(a, med, got, each, dels):
    plugins = list(med)
    # vnet over bridge always; with a baseline also the baseline over
    # bridge, and vnet over the baseline: what the change did.
    pairs = [("vnet", "bridge"), ("vnet-server", "bridge"), ("vnet-server", "vnet"),
             ("baseline", "bridge"), ("vnet", "baseline"), ("vnet-server", "baseline-server")]
    pairs = [(x, y) for x, y in pairs if x in med and y in med]
    # Columns as wide as the longest name in them: "baseline-server" and
    # the ratios' "vnet-server/baseline-server".
    w = max(12, max(len(p) for p in plugins) + 1)
    rw = max([19] + [len(x) + len(y) + 2 for x, y in pairs])
    names = "".join(f"{x + '/' + y:>{rw}}" for x, y in pairs)
    print(f"\ncontainers per second, medians of {a.rounds} rounds of {a.batch} containers each; ratios of the medians")
    print(f"{'phase':<8}" + "".join(f"{p:>{w}}" for p in plugins) + names + "   spread (min-max over rounds)")
    for phase in med[plugins[0]]:
        spread = "; ".join(f"{p} {min(got[p][phase]):.1f}-{max(got[p][phase]):.1f}" for p in plugins)
        print(f"{phase:<8}" + "".join(f"{med[p][phase]:>{w - 2}.1f}/s" for p in plugins)
              + "".join(f"{med[x][phase] / med[y][phase]:>{rw}.2f}" for x, y in pairs) + f"   {spread}")
    n = a.fill
    print(f"\npile-up to {n} containers, added one at a time (ms per ADD); ratios")
    rows = [("1st ADD", lambda e: e[0]), (f"{n}th ADD", lambda e: e[n - 1]),
            ("median of the first 10", lambda e: statistics.median(e[:10])),
            (f"median of the last 10", lambda e: statistics.median(e[-10:]))]
    print(f"{'':<26}" + "".join(f"{p:>{w}}" for p in plugins) + names)
    for label, f in rows:
        v = {p: f(each[p]) * 1e3 for p in plugins}
        print(f"{label:<26}" + "".join(f"{v[p]:>{w - 2}.1f}ms" for p in plugins) + "".join(f"{v[x] / v[y]:>{rw}.2f}" for x, y in pairs))
    print(f"{'DEL at ' + str(n) + ', one at a time':<26}" + "".join(f"{dels[p]:>{w - 2}.1f}/s" for p in plugins)
          + "".join(f"{dels[x] / dels[y]:>{rw}.2f}" for x, y in pairs))
    deciles = [max(1, n * k // 10) for k in range(1, 11)]
    print("\nmedian ADD time (ms) of the ten ADDs up to each tenth of the pile-up:")
    print(f"{'containers':<{w}}" + "".join(f"{d:>7}" for d in deciles))
    for p in plugins:
        print(f"{p:<{w}}" + "".join(f"{statistics.median(each[p][max(0, d - 10):d]) * 1e3:>7.1f}" for d in deciles))
    # What an ADD gains from the first tenth of the pile-up to the last, in
    # the medians of all the ADDs of each tenth (steadier than ten): the
    # kernel's own growth is bridge's, which every plugin pays as
    # namespaces pile up.
    k = max(1, n // 10)
    ends = {p: (statistics.median(each[p][:k]) * 1e3, statistics.median(each[p][-k:]) * 1e3) for p in plugins}
    print(f"\ngrowth of the median ADD from the first {k} to the last {k} of the pile-up:")
    for p in plugins:
        first, last = ends[p]
        than = ""
        if "bridge" in ends and p != "bridge":
            than = f", {(last - first) - (ends['bridge'][1] - ends['bridge'][0]):+.1f} ms beside bridge's"
        print(f"{p:<{w}}{first:>8.1f} ms to {last:.1f} ms: {last - first:+.1f} ms ({last / first:.2f}x){than}")


if __name__ == "__main__":
    main()
