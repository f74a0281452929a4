#!/usr/bin/env python3
"""Uplink teaming: LBT reaction time and aggregate, failover time.

esx1 has two uplinks of --line each on a distributed switch with load-based
teaming (threshold 75%, window and interval --window); a native peer's 10 Gbit
NIC is never the bottleneck. Two VMs that portid pins to the same uplink each
run a saturating vnet netperf TCP_STREAM to the peer; interim results every
0.25 s show when LBT moves one and what the two make together afterwards.
Then one stream runs while the user's way of pulling a cable
(`vnet exec esx1 -- ip link set vmnicN down`) cuts its uplink, and later
restores it: the interim results show the stall and the recovery.

usage: bench/teaming.py [--vnet bin/vnet] [--line 1Gbit] [--window 3s]
Needs root and iproute2. Not a test: it prints measurements and ratios.
"""
import argparse, json, os, re, subprocess, sys, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vnetlab import VnetLab  # noqa: E402

INTERIM = re.compile(r"Interim result:\s+([\d.]+) 10\^6bits/s over ([\d.]+) seconds ending at ([\d.]+)")


def spec(line, window, vms):
    rows = "\n".join(f"  - {{name: {v}, host: esx1, nics: [{{portgroup: pg-vm, ip: 10.70.0.{i + 1}/24}}]}}" for i, v in enumerate(vms))
    return f"""name: benchteam
hosts:
  - {{name: esx1, nics: [{{name: vmnic0, speed: {line}}}, {{name: vmnic1, speed: {line}}}]}}
  - {{name: peer, native: true, nics: [{{name: eth0, speed: 10Gbit, ip: 10.70.0.100/24}}]}}
switches:
  - name: dvs0
    uplinks:
      - {{name: u1, nics: {{esx1: vmnic0}}}}
      - {{name: u2, nics: {{esx1: vmnic1}}}}
    teaming: {{policy: loadbased, lbt: {{threshold: 75%, window: {window}, interval: {window}}}}}
    portgroups: [{{name: pg-vm}}]
vms:
{rows}
"""


class Lab(VnetLab):
    def netserver(self):
        if not getattr(self, "server", None):
            self.server = subprocess.Popen([self.vnet, "--state-dir", self.state, "exec", "peer", "--", self.vnet, "netserver", "-D"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)

    def uplinks(self):
        st = json.loads(self.v("status", "-o", "json", "benchteam"))[0]
        return {vm["name"]: vm["nics"][0].get("uplink", "") for vm in st["vms"]}

    def stream(self, vm, seconds, interval, out, key):
        """Runs a stream and stores [(end_time, Mbit/s)] in out[key]."""
        text = self.v("exec", vm, "--", self.vnet, "netperf", "-H", "10.70.0.100", "-l", str(seconds), "-D", str(interval), "-P", "0")
        out[key] = [(float(m[2]), float(m[0])) for m in INTERIM.findall(text)]


def parse_rate(s):
    units = {"Gbit": 1e9, "Mbit": 1e6}
    for u, f in units.items():
        if s.endswith(u):
            return float(s[:-len(u)]) * f
    raise SystemExit(f"--line {s}: use Mbit or Gbit")


def lbt(lab, line, window, seconds):
    # Two VM names that portid puts on the same uplink.
    for i in range(40):
        vms = [f"vm{i}a", f"vm{i}b"]
        lab.apply(spec(args.line, window, vms))
        ups = lab.uplinks()
        if ups[vms[0]] == ups[vms[1]]:
            break
    else:
        raise SystemExit("no two VM names share an uplink")
    start_uplink = ups[vms[0]]
    lab.netserver()
    out = {}
    started = time.time()
    threads = [threading.Thread(target=lab.stream, args=(vm, seconds, 0.25, out, vm)) for vm in vms]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ups = lab.uplinks()
    series = {}
    for vm in vms:
        for t, mbit in out.get(vm, []):
            series.setdefault(round(t * 4) / 4, []).append(mbit)
    total = sorted((t, sum(v)) for t, v in series.items() if len(v) == 2)
    one = line / 1e6
    reacted = next((t for t, s in total if s >= 1.8 * one), None)
    before = [s for t, s in total if t <= 1.5]
    after = [s for t, s in total if t > seconds - 3]
    move_s = None
    with open(os.path.join(lab.state, "agent-benchteam.log")) as fh:
        for l in fh:
            if "LBT on" in l:
                hms = time.strftime("%Y-%m-%d ", time.gmtime(started)) + l.split()[0]
                at = time.mktime(time.strptime(hms.split(".")[0], "%Y-%m-%d %H:%M:%S")) - time.timezone + float("0." + hms.split(".")[1])
                if at >= started - 1:
                    move_s = at - started
                    break
    return {"start": start_uplink, "end": ups, "reaction_s": reacted, "move_s": move_s,
            "before": sum(before) / max(len(before), 1), "after": sum(after) / max(len(after), 1)}


def failover(lab, line, seconds, cut_at, back_at):
    vm = next(iter(lab.uplinks()))
    uplink = lab.uplinks()[vm]
    nic = {"u1": "vmnic0", "u2": "vmnic1"}[uplink]
    out = {}
    t = threading.Thread(target=lab.stream, args=(vm, seconds, 0.1, out, "s"))
    t.start()
    time.sleep(cut_at)
    lab.v("exec", "esx1", "--", "ip", "link", "set", nic, "down")
    time.sleep(back_at - cut_at)
    moved = lab.uplinks()[vm]
    lab.v("exec", "esx1", "--", "ip", "link", "set", nic, "up")
    t.join()
    s = out.get("s", [])
    one = line / 1e6

    def stall_after(at):
        low = [t for t, m in s if t > at and m < 0.5 * one]
        first_ok = next((t for t, m in s if t > at + 0.05 and m >= 0.5 * one), None)
        return len(low) * 0.1, first_ok - at if first_ok else None

    cut_stall, cut_recover = stall_after(cut_at)
    back_stall, back_recover = stall_after(back_at)
    steady = [m for t, m in s if cut_at + 1 < t < back_at]
    return {"uplink": uplink, "moved_to": moved, "cut_low_s": cut_stall, "cut_recover_s": cut_recover,
            "back_low_s": back_stall, "after_cut": sum(steady) / max(len(steady), 1), "final": lab.uplinks()[vm]}


ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--vnet", default="bin/vnet")
ap.add_argument("--line", default="1Gbit")
ap.add_argument("--window", default="3s")
ap.add_argument("--seconds", type=int, default=12)
args = ap.parse_args()
if os.geteuid() != 0:
    sys.exit("needs root")
lab = Lab(os.path.abspath(args.vnet))
line = parse_rate(args.line)
print(f"machine: {lab.machine()}")
try:
    r = lbt(lab, line, args.window, args.seconds)
    print(f"LBT, two saturating streams on one {args.line} uplink (window = interval = {args.window}, threshold 75%):")
    print(f"  both started on {r['start']}; afterwards {r['end']}")
    print(f"  aggregate before the move {r['before']:.0f} Mbit/s = {r['before'] / (line / 1e6):.2f}x one uplink")
    print(f"  aggregate over the last 3 s {r['after']:.0f} Mbit/s = {r['after'] / (line / 1e6):.2f}x one uplink")
    mv = "no move logged" if r["move_s"] is None else f"{r['move_s']:.1f} s"
    print(f"  reaction: LBT moved a port {mv} after the streams started (agent log); "
          f"aggregate first >= 1.8x one uplink at {r['reaction_s']} s (0.25 s interim results)")
    f = failover(lab, line, 8, 2.0, 5.0)
    print(f"failover, one stream on {f['uplink']}, its NIC set down at 2.0 s and up at 5.0 s (0.1 s interim results):")
    print(f"  moved to {f['moved_to']}; {f['after_cut']:.0f} Mbit/s = {f['after_cut'] / (line / 1e6):.2f}x line after the cut")
    rec = "never" if f["cut_recover_s"] is None else f"{f['cut_recover_s']:.1f} s"
    print(f"  time below half the line after the cut {f['cut_low_s']:.1f} s; first 0.1 s interval above half the line {rec} after the cut")
    print(f"  NIC back up: the port returns to its policy's uplink {f['final']} (an LBT move does not outlive a failover); "
          f"{f['back_low_s']:.1f} s below half the line")
finally:
    if getattr(lab, "server", None):
        lab.server.kill()
    lab.destroy("benchteam")
