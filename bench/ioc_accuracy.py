#!/usr/bin/env python3
"""Network I/O Control accuracy on a 1 Gbit uplink (issue 4).

One host (esx1) with a 1 Gbit uplink sends to a native client with a 10 Gbit
NIC, so esx1's uplink is the only contention point. Each pool has its own VM
on its own port group; every VM runs a saturating vnet netperf TCP_STREAM.
Pool rates are read at layer 2 from the HTB classes (vnet ioc stats) over the
middle of each run; TCP goodput is printed beside them.

usage: bench/ioc_accuracy.py [--vnet bin/vnet] [--seconds 8] [--line 1Gbit]
Needs root. Not a test: it prints measurements and ratios, asserts nothing.
"""
import argparse, json, os, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vnetlab import VnetLab  # noqa: E402

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vnet", default="bin/vnet")
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--line", default="1Gbit")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    lab = Lab(os.path.abspath(a.vnet))
    line_bps = float(a.line.replace("Gbit", "e9").replace("Mbit", "e6"))
    rows = []

    def contention(label, shares, limits=None):
        name = "iocbench"
        lab.apply(spec(name, a.line, True, shares, limits))
        lab.v("exec", "client", "--", lab.vnet, "netserver")
        time.sleep(0.3)
        active = list(shares)
        good, l2 = lab.streams(active, a.seconds, name)
        total = sum(l2[p] for p in active)
        ideal_den = sum(shares.values())
        worst = 0.0
        parts = []
        for p in active:
            ideal = shares[p] / ideal_den
            worst = max(worst, abs(l2[p] - ideal) * 100)
            parts.append(f"{p} {l2[p]*100:.1f}% (ideal {ideal*100:.1f}%, goodput {good[p]/1e6:.0f} Mbit/s)")
        rows.append((label, f"worst pool {worst:.1f} points from ideal; total {total*100:.1f}% of line", "; ".join(parts)))
        lab.destroy(name)

    try:
        contention("2 pools 100:50", {"vm": 100, "vmotion": 50})
        contention("3 pools 100:50:25", {"vm": 100, "vmotion": 50, "backup": 25})
        contention("6 pools, S4 scenario 2", {"ft": 100, "nfs": 75, "vm": 75, "iscsi": 75, "vmotion": 50, "management": 50})
        contention("lone 25-share pool", {"backup": 25})

        lab.apply(spec("iocbench", a.line, True, {"vmotion": 50}, {"vmotion": "300Mbit"}))
        lab.v("exec", "client", "--", lab.vnet, "netserver")
        time.sleep(0.3)
        good, l2 = lab.streams(["vmotion"], a.seconds, "iocbench")
        rows.append(("300 Mbit limit", f"{l2['vmotion'] * line_bps / 300e6:.3f}x the limit at layer 2", f"goodput {good['vmotion']/1e6:.1f} Mbit/s"))
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
        lab.apply(team)
        lab.v("exec", "client", "--", lab.vnet, "netserver")
        time.sleep(0.3)
        box = {}
        ts = [threading.Thread(target=lambda vm=vm: box.__setitem__(vm, lab.netperf(vm, "-l", str(a.seconds + 2)))) for vm in ("vm-vmotion", "vm-vmotion2")]
        for t in ts:
            t.start()
        time.sleep(3.5)  # the agent moves the split within a second or two of the load
        stats = json.loads(lab.v("ioc", "stats", "iocbench", "-o", "json", "-i", f"{a.seconds - 3}s"))
        for t in ts:
            t.join()
        per = [sum(p["rate_bps"] for p in u["pools"] if p["pool"] == "vmotion") for u in stats["uplinks"]]
        rows.append(("300 Mbit team-wide limit over two uplinks", f"{sum(per) / 300e6:.3f}x the limit at layer 2",
                     f"uplinks {' + '.join(f'{x/1e6:.1f}' for x in per)} Mbit/s; goodput {sum(b['throughput_bps'] for b in box.values())/1e6:.1f} Mbit/s"))
        lab.destroy("iocbench")

        # Latency of a high-share pool while a low-share pool saturates, with
        # two controls: the same load without IOC (one FIFO), and the load on
        # another host's uplink (no shared queue: CPU contention alone).
        def rr_p99(infra_spec, loaded_vm):
            lab.apply(infra_spec)
            lab.v("exec", "client", "--", lab.vnet, "netserver")
            time.sleep(0.3)
            idle = lab.netperf("vm-rr", "-t", "TCP_RR", "-l", "4")["latency"]
            box = {}
            t = threading.Thread(target=lambda: box.__setitem__("s", lab.netperf(loaded_vm, "-l", "7")))
            t.start()
            time.sleep(1.5)
            busy = lab.netperf("vm-rr", "-t", "TCP_RR", "-l", "4")["latency"]
            t.join()
            lab.destroy("iocbench")
            return idle, busy

        shares = {"vm": 100, "backup": 25}
        for label, text, loaded in (
            ("with IOC", spec("iocbench", a.line, True, shares), "vm-backup"),
            ("without IOC", spec("iocbench", a.line, False, shares), "vm-backup"),
            ("control: load on another uplink", spec("iocbench", a.line, True, shares).replace(
                "  - {name: vm-backup, host: esx1", "  - {name: vm-backup, host: esx2").replace(
                "  - {name: client,", "  - {name: esx2, nics: [{name: vmnic0, speed: 1Gbit}]}\n  - {name: client,").replace(
                "nics: {esx1: vmnic0}", "nics: {esx1: vmnic0, esx2: vmnic0}"), "vm-backup"),
        ):
            idle, busy = rr_p99(text, loaded)
            rows.append((f"RR p99 of vm (100) beside a saturating backup (25) stream, {label}", f"{busy['p99_us'] / idle['p99_us']:.2f}x idle p99",
                         f"idle p50/p99 {idle['p50_us']:.0f}/{idle['p99_us']:.0f} us, loaded {busy['p50_us']:.0f}/{busy['p99_us']:.0f} us"))

        # The same traffic on an uncontended uplink, with and without IOC.
        res = {}
        for ioc in (False, True, False, True):
            lab.apply(spec("iocbench", "10Gbit", ioc, {"vm": 100}))
            lab.v("exec", "client", "--", lab.vnet, "netserver")
            time.sleep(0.3)
            r = lab.netperf("vm-vm", "-l", str(a.seconds))["throughput_bps"]
            res[ioc] = max(res.get(ioc, 0), r)
            lab.destroy("iocbench")
        rows.append(("IOC on an uncontended 10 Gbit uplink", f"{res[True] / res[False]:.3f}x throughput without IOC",
                     f"with {res[True]/1e6:.0f} Mbit/s, without {res[False]/1e6:.0f} Mbit/s (best of 2)"))
    finally:
        lab.destroy("iocbench")
    print(f"Network I/O Control accuracy, {a.line} uplink, {a.seconds} s runs, {os.cpu_count()} CPUs")
    for label, verdict, detail in rows:
        print(f"- {label}: {verdict}\n    {detail}")


if __name__ == "__main__":
    main()
