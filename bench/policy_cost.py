#!/usr/bin/env python3
"""What port security and ACLs cost a VM-to-VM path, beside the kernel's own.

Two namespaces talk over each of these paths, all built before the first
measurement and kept for the whole run:
  veth      a plain veth pair between the two namespaces: the physical limit
  bridge    a Linux bridge in a third namespace, a veth pair from each end
            into it, bridge-nf-call-* off: the bare switch
  redirect  (with clang) the same two veth pairs as bridge but no bridge: a
            tc program on each switch-side end hands every frame to the other
            pair's far end (bpf_redirect_peer, bench/redirect_peer.c): the
            cheapest local path between two ports the kernel has
  redirect-default, redirect-guard
            (with clang) redirect, its program making first the checks of
            vnet's default policy (redirect-default: source MAC, unicast
            destination MAC, IPv6 router advertisements and redirects) or of
            the default plus the IP guard (redirect-guard: IPv4 source, ARP
            sender) with the least code it can: the kernel's cheapest path
            for the same policy, beside vnet's default and guard
  redirect-acl
            (with clang) redirect-guard, its program also looking each TCP
            or UDP packet's connection up in a flow table (an LRU hash) and
            adding it when absent: the kernel's cheapest stateful path,
            beside vnet's ACLs (which judge a connection's first packet by
            their rules and the rest by their flow table)
  none      vnet, two VMs on one host's switch, every check accepted: no
            firewall at all
  default   vnet's default policy (no security: block): forged transmits,
            MAC changes, promiscuous mode and router advertisements rejected
  guard     the default plus the IP guard (ipSpoofing: false)
  acl-N     guard, and on the server's port group an ACL of N deny rules that
            never match (udp to unused ports from 192.0.2.0/24) before the
            allow that does, default deny: every new connection walks all N,
            replies pass by connection tracking
With --before BUILD, each vnet path named in --before-configs is built a
second time by that build of vnet, as "<path>@before", and measured in the
same rounds: a change's before and after side by side, with a /before column
(the path's figure over its @before's, the median of the per-round ratios). A vnet path with "-nft"
after its name is the same applied with
VNET_PORT_POLICY=nftables: the policy in nftables' bridge family, ACLs with
br_netfilter's connection tracking, as on a kernel without vnet's port
programs; without it vnet enforces the policy as it chooses on this kernel.
Each is measured with vnet netperf from one end: UDP_STREAM of 64-byte
datagrams (UDP64, the frames per second that reached the receiving
interface), TCP_RR (transactions/s on one connection: what every packet of
an established connection pays), TCP_CRR (a new connection per transaction:
what walking the ACL costs) and TCP_STREAM. The data loops are pinned, the
same for every path (netperf -T): for UDP64 and TCP_STREAM the client's on
one CPU and the server's on another (--cpus), so the sender's CPU carries the
path and the receiver's drains the socket; for TCP_RR and TCP_CRR both on
one CPU (--rr-cpus), so a transaction pays the path twice and two context
switches but no wake-up of an idle CPU, which on a virtual machine can cost
ten times the path and hide it. Every test runs on every path once, untimed,
for --warmup seconds before the first round. Then --rounds rounds, each
running every test on every path, the paths in a new random order for each
test of each round (seeded, --seed), so that a change in the machine's load
during the run falls on all paths alike. A path's figure is the median of
its rounds; its ratio against another (veth, none, and for default and guard
the kernel's cheapest path for the same policy, redirect-default and
redirect-guard) is the median of the two paths' ratios within each round,
which a load that changes from round to round moves less than it moves the
figures themselves. The spread printed after the table is the range of each
path's rounds, and of its ratios within rounds.

Then, unless --prog-seconds is 0, what each path's tc programs cost in the
kernel, per frame: with the kernel's run-time statistics of BPF programs on
(BPF_ENABLE_STATS, for that phase only: they cost every program two clock
reads), UDP64 runs once more on each path that has programs for
--prog-seconds, and the time its programs ran, over how many times they ran,
is their cost per frame there, cache misses and all: the figure the noise of
the rates hides.

usage: bench/policy_cost.py [--vnet bin/vnet] [--seconds 3] [--rounds 9]
           [--warmup 2] [--cpus 0,1] [--rr-cpus 0,0] [--seed 1]
           [--configs veth,redirect,redirect-default,redirect-guard,redirect-acl,bridge,none,
                      default,guard,acl-10,acl-1000,default-nft,guard-nft,
                      acl-10-nft,acl-1000-nft]
           [--tests UDP64,TCP_RR,TCP_CRR,TCP_STREAM]
           [--before bin/vnet-old] [--before-configs default,guard]
           [--prog-seconds 3]
Needs root. It takes /tmp/vnet-kernel.lock itself (do not wrap it in flock)
while it builds the paths, for the warm-up, for each round and while it
removes the paths, and lets it go between, so that a long run does not shut
other measurements out for its whole length. Not a test: it prints
measurements and ratios.
"""
import argparse, contextlib, ctypes, fcntl, json, os, random, re, shutil, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vnetlab import VnetLab, never_matching_acl  # noqa: E402

LOCK = "/tmp/vnet-kernel.lock"
PREFIX = "pcost"
OPEN = "{promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true}"
POLICY_ENV = "VNET_PORT_POLICY"
SERVER, CLIENT = "10.71.0.1", "10.71.0.2"
TESTS = {"UDP64": ("UDP_STREAM", ["--", "-m", "64"]), "TCP_RR": ("TCP_RR", []),
         "TCP_CRR": ("TCP_CRR", []), "TCP_STREAM": ("TCP_STREAM", [])}
# The tests whose transactions wait for the other end: both ends on one CPU.
ROUND_TRIPS = {"TCP_RR", "TCP_CRR"}
# After letting the lock go, how long to wait before taking it again, so that
# a run waiting for it gets it.
LOCK_PAUSE = 2


@contextlib.contextmanager
def kernel_lock():
    """The machine's kernel lock, held for one step of the run."""
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ip(*args):
    subprocess.run(["ip", *args], check=True)


def link_info(ns, name):
    return json.loads(subprocess.run(["ip", "-j", "-n", ns, "link", "show", name], capture_output=True, text=True, check=True).stdout)[0]


def spec(name, config):
    config = config.removesuffix("-nft")
    security, acl = {"none": OPEN, "default": None}.get(config, "{ipSpoofing: false}"), ""
    if config.startswith("acl-"):
        acl = never_matching_acl(int(config[4:]), "{action: allow, direction: ingress, from: {portgroup: pg-client}}")
    sec = f"\n        security: {security}" if security else ""
    return f"""name: {name}
hosts:
  - {{name: esx1}}
switches:
  - name: sw0
    hosts: [esx1]
    portgroups:
      - name: pg-server{sec}{acl}
      - name: pg-client{sec}
vms:
  - {{name: server, host: esx1, nics: [{{portgroup: pg-server, ip: {SERVER}/24}}]}}
  - {{name: client, host: esx1, nics: [{{portgroup: pg-client, ip: {CLIENT}/24}}]}}
"""


class Paths(VnetLab):
    """Every path's two namespaces, a netserver in each server end."""

    def __init__(self, vnet, before=None):
        super().__init__(vnet)
        self.ends, self.servers, self.plain, self.infras = {}, [], [], []
        # The namespace whose ports run each path's tc programs.
        self.progs_in = {}
        # The labs that built each vnet path, by infrastructure name.
        self.labs = {}
        self.before = VnetLab(before) if before else None

    def build(self, config):
        if config == "veth":
            a, b = f"{PREFIX}-veth-s", f"{PREFIX}-veth-c"
            for ns in (a, b):
                self.netns(ns)
            ip("-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b)
        elif config.startswith("redirect"):
            a, b = self.redirect_pairs(config)
            self.progs_in[config] = f"{PREFIX}-{REDIRECT_TAG[config]}-sw"
        elif config == "bridge":
            sw, a, b = f"{PREFIX}-br-sw", f"{PREFIX}-br-s", f"{PREFIX}-br-c"
            for ns in (sw, a, b):
                self.netns(ns)
            ip("-n", sw, "link", "add", "br0", "type", "bridge")
            for key in ("iptables", "ip6tables", "arptables"):
                path = f"/proc/sys/net/bridge/bridge-nf-call-{key}"
                subprocess.run(["ip", "netns", "exec", sw, "sh", "-c", f"[ ! -e {path} ] || echo 0 > {path}"], check=True)
            for ns, port in ((a, "ps"), (b, "pc")):
                ip("-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
                ip("-n", sw, "link", "set", port, "master", "br0", "up")
            ip("-n", sw, "link", "set", "br0", "up")
        else:
            lab = self
            if config.endswith("@before"):
                lab, config = self.before, config.removesuffix("@before")
            name = f"{PREFIX}{config.replace('-', '')}" + ("old" if lab is not self else "")
            os.environ.pop(POLICY_ENV, None)
            if config.endswith("-nft"):
                os.environ[POLICY_ENV] = "nftables"
            lab.apply(spec(name, config))
            os.environ.pop(POLICY_ENV, None)
            self.infras.append(name)
            self.labs[name] = lab
            if lab is not self:
                config += "@before"
            self.ends[config] = (f"vnet.{name}.server", f"vnet.{name}.client")
            self.progs_in[config] = f"vnet.{name}.esx1"
            return
        for ns, addr in ((a, SERVER), (b, CLIENT)):
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
        self.ends[config] = (a, b)

    def redirect_pairs(self, config):
        tag = REDIRECT_TAG[config]
        sw, a, b = f"{PREFIX}-{tag}-sw", f"{PREFIX}-{tag}-s", f"{PREFIX}-{tag}-c"
        for ns in (sw, a, b):
            self.netns(ns)
        for ns, port in ((a, "ps"), (b, "pc")):
            ip("-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("-n", sw, "link", "set", port, "up")
        # Without a bridge nothing answers ARP for the other end: static entries.
        mac = {ns: link_info(ns, "eth0")["address"] for ns in (a, b)}
        ip("-n", a, "neigh", "add", CLIENT, "lladdr", mac[b], "dev", "eth0")
        ip("-n", b, "neigh", "add", SERVER, "lladdr", mac[a], "dev", "eth0")
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "redirect_peer.c")
        work = tempfile.mkdtemp()
        vm = {"ps": (a, SERVER), "pc": (b, CLIENT)}
        try:
            for port, to in (("ps", "pc"), ("pc", "ps")):
                obj = os.path.join(work, port + ".o")
                policy = []
                if config != "redirect":
                    (me, my_ip), (peer, _) = vm[port], vm[to]
                    policy = ["-DPOLICY", f"-DSRC_MAC={c_bytes(mac[me])}", f"-DDST_MAC={c_bytes(mac[peer])}"]
                    if config in ("redirect-guard", "redirect-acl"):
                        policy += ["-DGUARD", f"-DSRC_IP={int.from_bytes(bytes(map(int, my_ip.split('.'))), 'little'):#x}"]
                    if config == "redirect-acl":
                        policy += ["-DSTATEFUL"]
                subprocess.run(["clang", "-O2", "-g", "-target", "bpf", f"-I/usr/include/{os.uname().machine}-linux-gnu",
                                f"-DTARGET={link_info(sw, to)['ifindex']}", *policy, "-c", src, "-o", obj], check=True)
                ip("-n", sw, "link", "set", port, "up")
                subprocess.run(["ip", "netns", "exec", sw, "tc", "qdisc", "add", "dev", port, "clsact"], check=True)
                subprocess.run(["ip", "netns", "exec", sw, "tc", "filter", "add", "dev", port, "ingress", "bpf", "da", "obj", obj, "sec", "tc"], check=True)
        finally:
            shutil.rmtree(work)
        return a, b

    def netns(self, ns):
        ip("netns", "add", ns)
        self.plain.append(ns)
        ip("-n", ns, "link", "set", "lo", "up")

    def start_servers(self):
        for server, _ in self.ends.values():
            self.servers.append(subprocess.Popen(["ip", "netns", "exec", server, self.vnet, "netserver", "-D"],
                                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)

    def measure(self, config, test, seconds, cpus):
        """cpus: {test: "lcpu,rcpu" or ""}."""
        name, extra = TESTS[test]
        pin = ["-T", cpus[test]] if cpus[test] else []
        out = subprocess.run(["ip", "netns", "exec", self.ends[config][1], self.vnet, "netperf", "-H", SERVER, "-t", name,
                              "-l", str(seconds), "-P", "0", "--json", *pin, *extra], capture_output=True, text=True, check=True).stdout
        r = json.loads(out)["results"][0]
        if test == "UDP64":
            return r["receive_interface"]["rx_packets_per_s"]
        return r["throughput_bps"] if test == "TCP_STREAM" else r["transactions_per_s"]

    def programs(self, config):
        """The IDs of the tc programs on the ports of a path's switch."""
        ns = self.progs_in.get(config)
        if not ns:
            return []
        ids = set()
        for link in json.loads(subprocess.run(["ip", "-j", "-n", ns, "link", "show"], capture_output=True, text=True, check=True).stdout):
            for hook in ("ingress", "egress"):
                out = subprocess.run(["tc", "-n", ns, "filter", "show", "dev", link["ifname"], hook], capture_output=True, text=True).stdout
                ids.update(int(i) for i in re.findall(r"\bid (\d+)", out))
        return sorted(ids)

    def close(self):
        for s in self.servers:
            s.terminate()
            s.wait()
        for name in self.infras:
            os.environ[POLICY_ENV] = "nftables" if name.removesuffix("old").endswith("nft") else ""
            self.labs[name].destroy(name)
        for ns in self.plain:
            subprocess.run(["ip", "netns", "del", ns], check=False)


def c_bytes(mac):
    """A MAC as the initializer of a C byte array."""
    return ",".join(f"0x{b}" for b in mac.split(":"))


REDIRECT_TAG = {"redirect": "rd", "redirect-default": "rdd", "redirect-guard": "rdg", "redirect-acl": "rda"}

# The bpf(2) commands and the system call's number the program costs need.
BPF_PROG_GET_FD_BY_ID, BPF_ENABLE_STATS, BPF_STATS_RUN_TIME = 13, 32, 0
NR_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine)


def bpf(cmd, *words):
    """bpf(2) with an attribute of 32-bit words; the file descriptor it returns."""
    attr = (ctypes.c_uint32 * 32)(*words)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(NR_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"bpf({cmd}): {os.strerror(ctypes.get_errno())}")
    return fd


def run_stats(prog_id):
    """A program's total run time (ns) and run count, from its fdinfo."""
    fd = bpf(BPF_PROG_GET_FD_BY_ID, prog_id)
    try:
        info = open(f"/proc/self/fdinfo/{fd}").read()
    finally:
        os.close(fd)
    get = lambda k: int(re.search(rf"^{k}:\s*(\d+)", info, re.M).group(1))
    return get("run_time_ns"), get("run_cnt")


def program_costs(paths, configs, seconds, cpus):
    """Per path with tc programs: ns its programs ran per run, and runs per
    frame received, over one UDP64 test with the run-time statistics on."""
    out = {}
    stats = bpf(BPF_ENABLE_STATS, BPF_STATS_RUN_TIME)
    try:
        for c in configs:
            ids = paths.programs(c)
            if not ids:
                continue
            before = [run_stats(i) for i in ids]
            rate = paths.measure(c, "UDP64", seconds, cpus)
            after = [run_stats(i) for i in ids]
            ns = sum(a[0] - b[0] for a, b in zip(after, before))
            runs = sum(a[1] - b[1] for a, b in zip(after, before))
            out[c] = (ns / runs if runs else 0, runs / (rate * seconds) if rate else 0)
    finally:
        os.close(stats)
    return out


# The kernel's cheapest path for each of vnet's policies that has one.
KERNEL = {"none": "redirect", "default": "redirect-default", "guard": "redirect-guard",
          "acl-10": "redirect-acl", "acl-1000": "redirect-acl"}


def kernel_of(c):
    """The kernel's cheapest path for the policy of vnet path c, or None."""
    return KERNEL.get(c.removesuffix("@before"))


def paired(got, c, base, t):
    """The median over rounds of c's figure over base's in the same round."""
    return statistics.median(x / y for x, y in zip(got[c][t], got[base][t]))


def fmt(test, v):
    if test == "TCP_STREAM":
        return f"{v / 1e9:.2f} Gbit/s"
    if test == "UDP64":
        return f"{v / 1e3:.0f} k/s"
    return f"{v:.0f} /s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vnet", default="bin/vnet")
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cpus", default="0,1", help="client,server CPUs of UDP64's and TCP_STREAM's data loops; '' for none")
    ap.add_argument("--rr-cpus", default="0,0", help="client,server CPUs of TCP_RR's and TCP_CRR's data loops; '' for none")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--configs", default="veth,redirect,redirect-default,redirect-guard,redirect-acl,bridge,none,default,guard,"
                                         "acl-10,acl-1000,default-nft,guard-nft,acl-10-nft,acl-1000-nft")
    ap.add_argument("--tests", default="UDP64,TCP_RR,TCP_CRR,TCP_STREAM")
    ap.add_argument("--before", help="another build of vnet whose paths to measure beside this one's")
    ap.add_argument("--before-configs", default="default,guard")
    ap.add_argument("--prog-seconds", type=int, default=3, help="UDP64's length per path while the programs' cost is measured; 0: not")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    configs, tests = a.configs.split(","), a.tests.split(",")
    if a.before:
        configs += [c + "@before" for c in a.before_configs.split(",")]
    if not shutil.which("clang"):
        print("no clang: the redirect paths are left out", file=sys.stderr)
        configs = [c for c in configs if not c.startswith("redirect")]
    for flag, val in (("--cpus", a.cpus), ("--rr-cpus", a.rr_cpus)):
        if val and max(int(c) for c in val.split(",")) >= os.cpu_count():
            sys.exit(f"{flag} {val}: this machine has {os.cpu_count()} CPUs")
    cpus = {t: a.rr_cpus if t in ROUND_TRIPS else a.cpus for t in tests}
    paths = Paths(os.path.abspath(a.vnet), a.before and os.path.abspath(a.before))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=os.path.dirname(os.path.abspath(__file__)),
                            capture_output=True, text=True).stdout.strip()
    print(f"{subprocess.run([paths.vnet, 'version'], capture_output=True, text=True).stdout.strip()}, tree at {commit or '?'}")
    got = {c: {t: [] for t in tests} for c in configs}
    rng = random.Random(a.seed)
    try:
        with kernel_lock():
            print(paths.machine())  # it measures too
            print(f"load average at the start: {open('/proc/loadavg').read().split()[:3]}")
            for c in configs:
                paths.build(c)
            paths.start_servers()
            if a.warmup:
                for t in tests:
                    for c in configs:
                        paths.measure(c, t, a.warmup, cpus)
        for rnd in range(a.rounds):
            time.sleep(LOCK_PAUSE)
            with kernel_lock():
                for t in tests:
                    order = configs[:]
                    rng.shuffle(order)
                    for c in order:
                        got[c][t].append(paths.measure(c, t, a.seconds, cpus))
            # Each round's figures as it ends: a run cut short still leaves them.
            this = {c: {t: got[c][t][-1] for t in tests} for c in configs}
            print(f"round {rnd + 1}/{a.rounds} done, load average {open('/proc/loadavg').read().split()[0]}: "
                  + json.dumps(this, separators=(",", ":")), file=sys.stderr)
        costs = {}
        if a.prog_seconds and NR_BPF and "UDP64" in cpus:
            time.sleep(LOCK_PAUSE)
            with kernel_lock():
                costs = program_costs(paths, configs, a.prog_seconds, cpus)
    finally:
        with kernel_lock():
            paths.close()
    print(f"load average at the end: {open('/proc/loadavg').read().split()[:3]}")
    report(got, configs, tests, a)
    report_costs(costs, a)


def report_costs(costs, a):
    if not costs:
        return
    print(f"\nin-kernel cost of each path's tc programs over {a.prog_seconds} s of UDP64 with BPF run-time statistics on"
          " (their total run time over their runs; runs per frame received):")
    for c, (ns, per) in costs.items():
        ref = kernel_of(c)
        extra = f", {ns - costs[ref][0]:+.1f} ns beside {ref}" if ref in costs else ""
        print(f"{c:<17} {ns:6.1f} ns per run, {per:.2f} runs per frame{extra}")


def report(got, configs, tests, a):
    med = {c: {t: statistics.median(got[c][t]) for t in tests} for c in configs}
    bases = [b for b in ("veth", "none") if b in configs]
    kernel = any(kernel_of(c) in configs for c in configs)
    before = any(c.endswith("@before") for c in configs)
    cols = [f"/{b}" for b in bases] + (["/kernel"] if kernel else []) + (["/before"] if before else [])
    head = f"{'path':<17}" + "".join(f" {t:>13}" + "".join(f" {col:>7}" for col in cols) for t in tests)
    print("\n" + head)
    for c in configs:
        line = f"{c:<17}"
        for t in tests:
            line += f" {fmt(t, med[c][t]):>13}" + "".join(f" {paired(got, c, b, t):>7.3f}" for b in bases)
            for show, ref in ((kernel, kernel_of(c)), (before, c + "@before")):
                if show:
                    line += f" {paired(got, c, ref, t):>7.3f}" if ref in configs else f" {'-':>7}"
        print(line)
    print(f"\nmedians of {a.rounds} rounds of {a.seconds} s per test after a {a.warmup} s warm-up, the paths in a random"
          f" order for each test of each round (seed {a.seed}), data loops on CPUs {a.cpus or 'unpinned'}"
          f" (TCP_RR, TCP_CRR: {a.rr_cpus or 'unpinned'});"
          f" /veth, /none: median of the per-round ratios; /kernel: the same against the kernel's cheapest path for the"
          f" same policy ({', '.join(f'{k}: {v}' for k, v in KERNEL.items())}). Spread (min-max over rounds):")
    for c in configs:
        print(f"{c:<17}" + "".join(f" {t} {fmt(t, min(got[c][t]))}-{fmt(t, max(got[c][t]))};" for t in tests))
    print("\nSpread of the ratios within rounds (min-max over rounds):")
    for c in configs:
        refs = [(f"/{b}", b) for b in bases if b != c]
        if kernel_of(c) in configs:
            refs.append(("/kernel", kernel_of(c)))
        if c + "@before" in configs:
            refs.append(("/before", c + "@before"))
        parts = []
        for t in tests:
            for col, b in refs:
                r = [x / y for x, y in zip(got[c][t], got[b][t])]
                parts.append(f"{t}{col} {min(r):.3f}-{max(r):.3f}")
        if parts:
            print(f"{c:<17} " + "; ".join(parts))
    print("\nrounds: " + json.dumps(got, separators=(",", ":")))


if __name__ == "__main__":
    main()
