"""What the bench scripts share: the vnet binary with a state directory of its own."""
import os, subprocess, tempfile


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
