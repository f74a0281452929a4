#!/usr/bin/env python3
"""Network I/O Control accuracy on a 1 Gbit uplink (--line for others).

One host (esx1) with a 1 Gbit uplink sends to a native client with a 10 Gbit
NIC, so esx1's uplink is the only contention point. Each pool has its own VM
on its own port group; every VM runs a saturating vnet netperf TCP_STREAM.
Pool rates are read at layer 2 from the HTB classes (vnet ioc stats) over the
middle of each run; TCP goodput is printed beside them.

usage: bench/ioc_accuracy.py [--vnet bin/vnet] [--seconds 8] [--line 1Gbit] [--rr-rounds 5]
                             [--only shares|limits|latency|overhead] [--halt-poll NS]
Needs root. Not a test: it prints measurements and ratios, asserts nothing.
"""
import argparse, json, os, re, statistics, subprocess, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vnetlab import VnetLab, guest_halt_poll, written_for_run  # noqa: E402

POOLS = ["management", "vmotion", "ft", "iscsi", "nfs", "vm", "backup"]


def spec(name, line, ioc, shares, limits=None):
    limits = limits or {}
    lines = [f"name: {name}", "hosts:", f"  - {{name: esx1, nics: [{{name: vmnic0, speed: {line}}}]}}",
             "  - {name: client, native: true, nics: [{name: eth0, speed: 10Gbit, ip: 10.60.0.100/24}]}",
             "switches:", "  - name: dvs0", "    uplinks: [{name: u1, nics: {esx1: vmnic0}}]"]
    if ioc:
        lines.append("    ioc:\n      enabled: true\n      pools:")
        for p in POOLS:
            opts = [f"shares: {shares.get(p, 50)}"]
            if p in limits:
                opts.append(f"limit: {limits[p]}")
            lines.append(f"        {p}: {{{', '.join(opts)}}}")
    lines.append("    portgroups:")
    for p in POOLS:
        pool = f", pool: {p}" if ioc else ""
        lines.append(f"      - {{name: pg-{p}{pool}}}")
    lines.append("vms:")
    for i, p in enumerate(POOLS):
        lines.append(f"  - {{name: vm-{p}, host: esx1, nics: [{{portgroup: pg-{p}, ip: 10.60.0.{i + 1}/24}}]}}")
    lines.append(f"  - {{name: vm-rr, host: esx1, nics: [{{portgroup: pg-vm, ip: 10.60.0.50/24}}]}}")
    return "\n".join(lines) + "\n"


class Lab(VnetLab):
    def netperf(self, vm, *args):
        out = self.v("exec", vm, "--", self.vnet, "netperf", "-H", "10.60.0.100", "-P", "0", "--json", *args)
        return json.loads(out)["results"][0]

    def rr_rounds(self, text, pin, rounds, load=None, tune=None):
        """Alternating idle and loaded TCP_RR runs from vm-rr: p99 ratio per round.
        Two netservers, so that with pin each test's server has vm-rr's or
        vm-backup's core. load runs the stream (default: vm-backup to the client);
        tune, if given, runs after apply."""
        load = load or (lambda: self.netperf("vm-backup", "-p", "12866", "-l", "6"))
        self.apply(text)
        if tune:
            tune()
        rr_cpu, bulk_cpu = (["taskset", "-c", "1"], ["taskset", "-c", "0"]) if pin else ([], [])
        self.v("exec", "client", "--", *rr_cpu, self.vnet, "netserver")
        self.v("exec", "client", "--", *bulk_cpu, self.vnet, "netserver", "-p", "12866")
        time.sleep(0.3)
        ratios = []
        try:
            for _ in range(rounds):
                idle = self.netperf("vm-rr", "-t", "TCP_RR", "-l", "3")["latency"]
                t = threading.Thread(target=load)
                t.start()
                time.sleep(1.5)
                busy = self.netperf("vm-rr", "-t", "TCP_RR", "-l", "3")["latency"]
                t.join()
                ratios.append(busy["p99_us"] / idle["p99_us"])
        finally:
            self.destroy("iocbench")
        return ratios, idle, busy

    def streams(self, pools, secs, infra):
        """Saturating streams from each pool's VM; L2 rates from the classes over the middle."""
        results, threads = {}, []
        for p in pools:
            t = threading.Thread(target=lambda p=p: results.__setitem__(p, self.netperf(f"vm-{p}", "-l", str(secs))))
            t.start()
            threads.append(t)
        time.sleep(1.5)
        stats = json.loads(self.v("ioc", "stats", infra, "-o", "json", "-i", f"{secs - 3}s")) if infra else None
        for t in threads:
            t.join()
        l2 = {}
        if stats:
            for u in stats["uplinks"]:
                for p in u["pools"]:
                    l2[p["pool"]] = p["share_of_line"]
        return {p: results[p]["throughput_bps"] for p in pools}, l2


RFS_SYSCTL = "/proc/sys/net/core/rps_sock_flow_entries"


def flow_steering(entries=32768):
    """Turns on receive flow steering for the machine (a global sysctl) and
    puts the old value back after."""
    return written_for_run(RFS_SYSCTL, entries)


def steer_flows(prefix, per_queue=4096):
    """RFS on every veth in the namespaces whose names start with prefix:
    each flow's receive work moves to the CPU its reader last ran on. The
    settings go with the links when the infrastructure is destroyed."""
    cpus = format((1 << os.cpu_count()) - 1, "x")
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    for ns in (l.split()[0] for l in names.splitlines() if l.startswith(prefix)):
        links = subprocess.run(["ip", "-n", ns, "-o", "link", "show", "type", "veth"], capture_output=True, text=True, check=True).stdout
        for dev in (l.split(":")[1].strip().split("@")[0] for l in links.splitlines()):
            script = f"for q in /sys/class/net/{dev}/queues/rx-*; do echo {cpus} > $q/rps_cpus && echo {per_queue} > $q/rps_flow_cnt; done"
            subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", script], check=True)


class Bench:
    def __init__(self, a):
        self.a, self.lab, self.rows = a, Lab(os.path.abspath(a.vnet)), []
        self.line_bps = float(a.line.replace("Gbit", "e9").replace("Mbit", "e6"))

    def serve(self, text):
        self.lab.apply(text)
        self.lab.v("exec", "client", "--", self.lab.vnet, "netserver")
        time.sleep(0.3)

    def contention(self, label, shares, limits=None):
        a, lab = self.a, self.lab
        self.serve(spec("iocbench", a.line, True, shares, limits))
        active = list(shares)
        good, l2 = lab.streams(active, a.seconds, "iocbench")
        total = sum(l2[p] for p in active)
        ideal_den = sum(shares.values())
        worst = 0.0
        parts = []
        for p in active:
            ideal = shares[p] / ideal_den
            worst = max(worst, abs(l2[p] - ideal) * 100)
            parts.append(f"{p} {l2[p]*100:.1f}% (ideal {ideal*100:.1f}%, goodput {good[p]/1e6:.0f} Mbit/s)")
        self.rows.append((label, f"worst pool {worst:.1f} points from ideal; total {total*100:.1f}% of line", "; ".join(parts)))
        lab.destroy("iocbench")

    def shares(self):
        self.contention("2 pools 100:50", {"vm": 100, "vmotion": 50})
        self.contention("3 pools 100:50:25", {"vm": 100, "vmotion": 50, "backup": 25})
        self.contention("6 pools, S4 scenario 2", {"ft": 100, "nfs": 75, "vm": 75, "iscsi": 75, "vmotion": 50, "management": 50})
        self.contention("lone 25-share pool", {"backup": 25})

    def limits(self):
        a, lab = self.a, self.lab
        self.serve(spec("iocbench", a.line, True, {"vmotion": 50}, {"vmotion": "300Mbit"}))
        good, l2 = lab.streams(["vmotion"], a.seconds, "iocbench")
        self.rows.append(("300 Mbit limit", f"{l2['vmotion'] * self.line_bps / 300e6:.3f}x the limit at layer 2", f"goodput {good['vmotion']/1e6:.1f} Mbit/s"))
        lab.destroy("iocbench")

        # A team-wide limit: two VMs of the limited pool pinned to different
        # uplinks of esx1; the agent (started by apply) splits the limit.
        team = spec("iocbench", a.line, True, {"vmotion": 50}, {"vmotion": "300Mbit"}).replace(
            "nics: [{name: vmnic0, speed: %s}]}" % a.line, "nics: [{name: vmnic0, speed: %s}, {name: vmnic1, speed: %s}]}" % (a.line, a.line)).replace(
            "    uplinks: [{name: u1, nics: {esx1: vmnic0}}]", "    uplinks: [{name: u1, nics: {esx1: vmnic0}}, {name: u2, nics: {esx1: vmnic1}}]").replace(
            "      - {name: pg-vmotion, pool: vmotion}",
            "      - {name: pg-vmotion, pool: vmotion, teaming: {policy: failover, active: [u1], standby: [u2]}}\n"
            "      - {name: pg-vmotion2, pool: vmotion, teaming: {policy: failover, active: [u2], standby: [u1]}}") + \
            "  - {name: vm-vmotion2, host: esx1, nics: [{portgroup: pg-vmotion2, ip: 10.60.0.60/24}]}\n"
        self.serve(team)
        box = {}
        ts = [threading.Thread(target=lambda vm=vm: box.__setitem__(vm, lab.netperf(vm, "-l", str(a.seconds + 2)))) for vm in ("vm-vmotion", "vm-vmotion2")]
        for t in ts:
            t.start()
        time.sleep(3.5)  # the agent moves the split within a second or two of the load
        stats = json.loads(lab.v("ioc", "stats", "iocbench", "-o", "json", "-i", f"{a.seconds - 3}s"))
        for t in ts:
            t.join()
        per = [sum(p["rate_bps"] for p in u["pools"] if p["pool"] == "vmotion") for u in stats["uplinks"]]
        self.rows.append(("300 Mbit team-wide limit over two uplinks", f"{sum(per) / 300e6:.3f}x the limit at layer 2",
                          f"uplinks {' + '.join(f'{x/1e6:.1f}' for x in per)} Mbit/s; goodput {sum(b['throughput_bps'] for b in box.values())/1e6:.1f} Mbit/s"))
        lab.destroy("iocbench")

    def latency(self):
        """A high-share pool's TCP_RR p99 while a low-share pool saturates.
        Controls: the same load without IOC (one FIFO); the load on another
        host's uplink (no shared uplink queue, but the physical switch and the
        client's port still shared); and a stream outside the infrastructure,
        which shares only the CPUs (the floor this machine sets). A fourth
        setup gives the two VMs a core each (cpus: 1); a fifth turns on
        receive flow steering (a machine-wide sysctl, restored after), which
        moves each flow's receive work to its reader's CPU. p99 on 2 vCPUs
        moves from run to run, hence rounds and the median."""
        a = self.a
        shares = {"vm": 100, "backup": 25}
        other_host = lambda t: t.replace(
            "  - {name: vm-backup, host: esx1", "  - {name: vm-backup, host: esx2").replace(
            "  - {name: client,", f"  - {{name: esx2, nics: [{{name: vmnic0, speed: {a.line}}}]}}\n  - {{name: client,").replace(
            "nics: {esx1: vmnic0}", "nics: {esx1: vmnic0, esx2: vmnic0}")
        # cpusets go round-robin in spec order: vm-backup (7th VM) gets CPU 0, vm-rr (8th) CPU 1
        own_core = lambda t: re.sub(r"^(  - \{name: vm-.*)\}$", r"\1, cpus: 1}", t, flags=re.M)
        for label, text, pin in (
            ("with IOC", spec("iocbench", a.line, True, shares), False),
            ("without IOC (one FIFO)", spec("iocbench", a.line, False, shares), False),
            ("control: the load on another host's uplink", other_host(spec("iocbench", a.line, True, shares)), False),
            ("with IOC, each VM and its netserver on a core of its own", own_core(spec("iocbench", a.line, True, shares)), True),
        ):
            self.rr_row(label, *self.lab.rr_rounds(text, pin, a.rr_rounds))
        self.rr_row(f"control: no backup stream, a {a.line} stream outside the infrastructure instead (shares only the CPUs)", *self.unrelated_stream(a))
        with flow_steering():
            self.rr_row("with IOC and receive flow steering on every lab link (not vnet's default: see docs/benchmarks.md)",
                        *self.lab.rr_rounds(spec("iocbench", a.line, True, shares), False, a.rr_rounds, tune=lambda: steer_flows("vnet.iocbench.")))

    def rr_row(self, label, ratios, idle, busy):
        self.rows.append((f"RR p99 of vm (100) beside a saturating backup (25) stream, {label}",
                          f"median {statistics.median(ratios):.2f}x idle p99 over {len(ratios)} rounds",
                          f"rounds {' '.join(f'{r:.2f}' for r in ratios)}; last: idle p50/p99 {idle['p50_us']:.0f}/{idle['p99_us']:.0f} us, "
                          f"loaded {busy['p50_us']:.0f}/{busy['p99_us']:.0f} us"))

    def unrelated_stream(self, a):
        """The floor: the same RR beside a stream at the line rate that shares
        nothing with it but the CPUs (two namespaces of the bench's own,
        outside the infrastructure, a veth pair with an HTB class at the
        line rate)."""
        sh = lambda *c: subprocess.run(c, check=True, capture_output=True)
        bucket = int(max(64 * 1024 + 1600, self.line_bps / 8 * 0.002))  # as plan.ClassBurst: 2 ms, a GSO frame at least
        for ns in ("iocbench-xa", "iocbench-xb"):
            sh("ip", "netns", "add", ns)
        server = None
        try:
            sh("ip", "link", "add", "xa0", "netns", "iocbench-xa", "type", "veth", "peer", "name", "xb0", "netns", "iocbench-xb")
            for ns, dev, ip in (("iocbench-xa", "xa0", "192.168.231.1/24"), ("iocbench-xb", "xb0", "192.168.231.2/24")):
                sh("ip", "-n", ns, "addr", "add", ip, "dev", dev)
                sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "netns", "exec", "iocbench-xa", "tc", "qdisc", "add", "dev", "xa0", "root", "handle", "1:", "htb", "default", "10")
            sh("ip", "netns", "exec", "iocbench-xa", "tc", "class", "add", "dev", "xa0", "parent", "1:", "classid", "1:10",
               "htb", "rate", a.line.lower(), "burst", str(bucket), "cburst", str(bucket))
            server = subprocess.Popen(["ip", "netns", "exec", "iocbench-xb", self.lab.vnet, "netserver", "-D"], stderr=subprocess.DEVNULL)
            time.sleep(0.3)
            load = lambda: sh("ip", "netns", "exec", "iocbench-xa", self.lab.vnet, "netperf", "-H", "192.168.231.2", "-l", "6", "-P", "0")
            return self.lab.rr_rounds(spec("iocbench", a.line, True, {"vm": 100, "backup": 25}), False, a.rr_rounds, load)
        finally:
            if server:
                server.kill()
            for ns in ("iocbench-xa", "iocbench-xb"):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def overhead(self):
        """The same traffic on an uncontended uplink, with and without IOC."""
        a, lab = self.a, self.lab
        res = {}
        for ioc in (False, True, False, True):
            self.serve(spec("iocbench", "10Gbit", ioc, {"vm": 100}))
            r = lab.netperf("vm-vm", "-l", str(a.seconds))["throughput_bps"]
            res[ioc] = max(res.get(ioc, 0), r)
            lab.destroy("iocbench")
        self.rows.append(("IOC on an uncontended 10 Gbit uplink", f"{res[True] / res[False]:.3f}x throughput without IOC",
                          f"with {res[True]/1e6:.0f} Mbit/s, without {res[False]/1e6:.0f} Mbit/s (best of 2)"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vnet", default="bin/vnet")
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--line", default="1Gbit")
    ap.add_argument("--rr-rounds", type=int, default=5)
    parts = ["shares", "limits", "latency", "overhead"]
    ap.add_argument("--only", choices=parts, help="run one part of the table")
    ap.add_argument("--halt-poll", type=int, metavar="NS", help="let idle vCPUs poll NS ns before halting, for the run (a slow-to-wake VM)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    b = Bench(a)
    with guest_halt_poll(a.halt_poll):
        machine = b.lab.machine()
        try:
            for p in parts:
                if a.only in (None, p):
                    getattr(b, p)()
        finally:
            b.lab.destroy("iocbench")
    print(f"Network I/O Control accuracy, {a.line} uplink, {a.seconds} s runs, {os.cpu_count()} CPUs")
    print(f"machine: {machine}")
    for label, verdict, detail in b.rows:
        print(f"- {label}: {verdict}\n    {detail}")


if __name__ == "__main__":
    main()
