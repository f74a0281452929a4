"""What the bench scripts share: the vnet binary with a state directory of its
own, and a machine-wide knob some of them may turn for the length of a run."""
import contextlib, os, signal, subprocess, sys, tempfile

HALT_POLL = "/sys/module/haltpoll/parameters/guest_halt_poll_ns"


def _exit_on(signum, _frame):
    sys.exit(128 + signum)


@contextlib.contextmanager
def written_for_run(path, value):
    """Writes value to a machine-wide knob under /proc or /sys and puts the
    old value back afterwards, however the run ends short of SIGKILL: a
    SIGTERM or SIGHUP (pkill, a closed terminal) would otherwise end the
    script without running this, leaving the machine changed."""
    with open(path) as f:
        before = f.read().strip()
    handlers = {sig: signal.signal(sig, _exit_on) for sig in (signal.SIGTERM, signal.SIGHUP)}
    with open(path, "w") as f:
        f.write(str(value))
    try:
        yield
    finally:
        with open(path, "w") as f:
            f.write(before)
        for sig, h in handlers.items():
            signal.signal(sig, h)


@contextlib.contextmanager
def guest_halt_poll(ns):
    """In a KVM guest with the haltpoll cpuidle driver, an idle vCPU polls for
    up to ns nanoseconds before it halts, so a wake-up within that time costs
    no trip through the host's scheduler. Machine-wide; put back after. None
    changes nothing."""
    if ns is None:
        yield
        return
    if not os.path.exists(HALT_POLL):
        sys.exit(f"--halt-poll: this kernel has no guest halt polling to set (no {HALT_POLL})")
    with written_for_run(HALT_POLL, ns):
        yield


def never_matching_acl(n, allow):
    """A port group's acl: block (indented for a port group of a switch) of
    n deny rules that never match (udp to unused ports from 192.0.2.0/24)
    before the allow rule given, default deny: every new connection walks
    all n."""
    rules = [f"          - {{action: deny, direction: ingress, proto: udp, dport: {20000 + i}, from: 192.0.2.0/24}}" for i in range(n)]
    rules.append(f"          - {allow}")
    return "\n        acl:\n          default: deny\n          rules:\n" + "\n".join(rules)


class VnetLab:
    """Runs vnet commands against a private state directory, so a benchmark's
    infrastructures and agents never mix with the machine's own."""

    def __init__(self, vnet):
        self.vnet, self.state = vnet, tempfile.mkdtemp()

    def v(self, *args, check=True):
        r = subprocess.run([self.vnet, "--state-dir", self.state, *args], capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"vnet {' '.join(args)}: {r.stderr or r.stdout}")
        return r.stdout

    def cni_plugin(self):
        """The CNI plugin of this build: the vnet-cni binary beside vnet (make
        build puts both in bin/), or, for a build that has none, vnet itself,
        which answers CNI when called by that name."""
        beside = os.path.join(os.path.dirname(os.path.abspath(self.vnet)), "vnet-cni")
        return beside if os.path.isfile(beside) else os.path.abspath(self.vnet)

    def apply(self, text):
        f = os.path.join(self.state, "spec.yaml")
        with open(f, "w") as fh:
            fh.write(text)
        self.v("apply", f)

    def destroy(self, name):
        self.v("destroy", name, check=False)

    def machine(self):
        """The lab reports' machine line, with its wake probe: on a day when the
        host is slow to run an idle vCPU again, latency figures measure that."""
        return self.v("lab", "machine", check=False).strip()
