#!/usr/bin/env bash
# What the test suite uses beyond Go, installed from Debian when missing:
# iperf3 and sockperf (the benchmarks' peers), chromium (the lab report and
# the dashboard), etcd (the 3-member cluster test), Graphviz (reading the
# topology's dot), a C toolchain with autoconf, automake and texinfo (to
# build netperf 2.7.1 from ../shared/peers), flent with fping (the netperf
# interop tests), the CNI plugins, podman, runc and a static busybox (the
# container runtime tests), and QEMU with a kernel image for the guest tests when the
# machine has none in /boot (a container or a microVM), with libvirt's daemon and
# virsh for the libvirt test, and containerd with crictl (built with Go: Debian
# 12 has no package of it) for the Kubernetes CRI test.
#
# Without root or apt-get it installs nothing: it names what is missing and
# the tests that need it skip, each saying why in the suite's summary.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(iperf3 sockperf iproute2 util-linux chromium etcd-server graphviz gcc make autoconf automake texinfo flent fping
  containernetworking-plugins podman runc busybox-static)
need=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
# QEMU, libvirt and a kernel without recommends: the guest tests need no more.
bare=()
command -v qemu-system-x86_64 >/dev/null || bare+=(qemu-system-x86)
command -v libvirtd >/dev/null || bare+=(libvirt-daemon-system libvirt-daemon-driver-qemu)
command -v virsh >/dev/null || bare+=(libvirt-clients)
compgen -G '/boot/vmlinuz-*' >/dev/null || bare+=(linux-image-amd64)
command -v containerd >/dev/null || bare+=(containerd)

# crictl, kubelet's project's client of the CRI, from the Go module proxy.
crictl_module=sigs.k8s.io/cri-tools/cmd/crictl@v1.37.0
if ! command -v crictl >/dev/null; then
  if [ "$(id -u)" -eq 0 ] && command -v "${GO:-go}" >/dev/null; then
    echo "deps: installing crictl ($crictl_module) in /usr/local/bin" >&2
    GOBIN=/usr/local/bin "${GO:-go}" install "$crictl_module"
  else
    echo "deps: crictl missing (as root: GOBIN=/usr/local/bin go install $crictl_module)" >&2
  fi
fi

if [ ${#need[@]} -eq 0 ] && [ ${#bare[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "deps: not installing (needs root and apt-get); missing: ${need[*]} ${bare[*]}" >&2
  echo "deps: the tests that use them will skip and say so at the end" >&2
  exit 0
fi
echo "deps: installing ${need[*]} ${bare[*]}" >&2
apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ${#bare[@]} -gt 0 ]; then
  # libvirt's package would start the machine's libvirtd, which reads its
  # hooks only as it starts: the libvirt test runs a daemon of its own and
  # skips beside a running one. containerd's would start the machine's
  # containerd, which the CRI test does not use: it runs one of its own.
  # policy-rc.d tells Debian's maintainer
  # scripts not to start services; one the machine already has is kept.
  held_services=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    held_services=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get install -y -qq --no-install-recommends "${bare[@]}" >/dev/null
  if [ -n "$held_services" ]; then
    rm -f /usr/sbin/policy-rc.d
    trap - EXIT
  fi
fi
