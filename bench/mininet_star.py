#!/usr/bin/python3
"""The star of bench/scale.py built with Mininet's Python API, timed.

One Linux bridge (Mininet's LinuxBridge, no controller), N hosts each linked to
it by a plain veth Link (or, with --tc, a TCLink with bw=1000: an HTB
qdisc of 1 Gbit/s on each end, made with tc) with an address. It times, as
wall time: building the star (the Mininet object, the switch, the hosts and
their links, net.build and net.start), adding one host (addHost, addLink, the
link's end attached to the bridge, the host's address configured), changing
that host's address (setIP), removing it (delLinkBetween, delHost), each the
median over --changes, and net.stop (as destroy). It prints one JSON object
of seconds per operation on stdout.

usage: /usr/bin/python3 bench/mininet_star.py --tag m1234 --n 100 [--changes 5] [--tc]

All its names begin with TAG: the bridge TAGs (its ports TAGs-ethK in the root
namespace), the hosts TAGhI (their shells show as `mininet:TAGhI`), so that what
it made can be told from anything else on the machine. It stops the network on
exit, SIGINT, SIGTERM and SIGHUP, then checks that no shell, bridge or port of
its own is left, and fails if one is.

Needs root and Mininet 2.3 (Debian's `mininet` package, for the system python3)
with bridge-utils. Run it from bench/scale.py --mininet, which holds the kernel
lock around it.
"""
import argparse, json, os, resource, signal, statistics, subprocess, sys, time

from mininet.link import Link, TCLink
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.nodelib import LinuxBridge


def ip(i):
    """The address of host i (1-based); the same as bench/scale.py gives VM i."""
    return f"10.{100 + i // 65000}.{i // 250 % 256}.{i % 250 + 1}/8"


def terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def timed(fn):
    t = time.monotonic()
    fn()
    return time.monotonic() - t


class Star:
    def __init__(self, tag, tc):
        self.tag, self.tc = tag, tc
        self.link = TCLink if tc else Link
        self.net = self.sw = None
        self.pids = set()  # every shell this run started, to check they are gone

    def build(self, n):
        self.net = Mininet(switch=LinuxBridge, controller=None, link=self.link, build=False,
                           autoSetMacs=False, waitConnected=False)
        self.sw = self.net.addSwitch(self.tag + "s")
        self.pids.add(self.sw.pid)
        for i in range(1, n + 1):
            self.add_host(i)
        self.net.build()
        self.net.start()

    def add_host(self, i):
        h = self.net.addHost(f"{self.tag}h{i}", ip=ip(i))
        self.pids.add(h.pid)
        if self.tc:
            self.net.addLink(h, self.sw, bw=1000)
        else:
            self.net.addLink(h, self.sw)
        return h

    def add_live(self, i):
        """A host added to the running star: what build and start do for one host."""
        h = self.add_host(i)
        port = self.net.linksBetween(h, self.sw)[0].intf2
        self.sw.cmd("brctl addif", self.sw, port)
        h.configDefault()
        return h

    def remove(self, h):
        self.net.delLinkBetween(h, self.sw)
        self.net.delHost(h)

    def stop(self):
        if self.net is not None:
            net, self.net = self.net, None
            net.stop()

    def leftovers(self):
        """What of this run is still there: live shells, its bridge and ports."""
        deadline = time.monotonic() + 5
        while any(alive(p) for p in self.pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [f"shell {p}" for p in sorted(self.pids) if alive(p)]
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        for line in links.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name == self.tag + "s" or name.startswith(self.tag + "s-eth"):
                left.append(f"link {name}")
        return left


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tag", required=True, help="prefix of every name, at most 5 characters")
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--changes", type=int, default=5)
    ap.add_argument("--tc", action="store_true", help="TCLink with bw=1000 (HTB, Mbit/s) instead of Link")
    a = ap.parse_args()
    if len(a.tag) > 5:
        sys.exit("mininet_star.py: --tag longer than 5 characters makes names past the kernel's 15")
    if os.geteuid() != 0:
        sys.exit("mininet_star.py: needs root")
    # Each host's shell keeps a pty's two ends open in this process.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(soft, min(hard, 4 * a.n + 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    setLogLevel("warning")
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, terminate)
    star = Star(a.tag, a.tc)
    out = {}
    try:
        out["first apply"] = timed(lambda: star.build(a.n))
        adds, changes, removes = [], [], []
        for k in range(a.changes):
            t = time.monotonic()
            h = star.add_live(a.n + 1)
            adds.append(time.monotonic() - t)
            changes.append(timed(lambda: h.setIP(ip(a.n + 2 + k))))
            removes.append(timed(lambda: star.remove(h)))
        out["add one VM"] = statistics.median(adds)
        out["change one address"] = statistics.median(changes)
        out["remove one VM"] = statistics.median(removes)
        out["destroy"] = timed(star.stop)
    finally:
        # Also on an error or a signal: stop what is there (a second signal here is ignored).
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        star.stop()
        left = star.leftovers()
    if left:
        sys.exit("mininet_star.py: left behind: " + ", ".join(left))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
