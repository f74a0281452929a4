#!/usr/bin/env bash
# make deps: the Debian packages vnet's tests use, installed when missing
# (as root): iperf3 and sockperf for the benchmarks' peers, chromium to
# drive the dashboard and render the lab report, etcd for the 3-member
# cluster test, Graphviz to read the topology's dot, QEMU and a kernel for
# the guest test, a C toolchain with autoconf, automake and texinfo to build
# netperf 2.7.1 from ../shared/peers, and flent with fping for the netperf
# interop tests. Without them those tests skip and make test lists them.
set -euo pipefail
if ! command -v apt-get >/dev/null; then
  echo "deps: no apt-get; install by hand what the skipped tests name" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
need=()
for p in iperf3 sockperf iproute2 util-linux chromium etcd-server graphviz gcc make autoconf automake texinfo flent fping; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The QEMU test boots a Debian kernel with its modules under TCG: qemu, and a
# kernel image when the machine has none in /boot (a container or microVM).
qemu=()
command -v qemu-system-x86_64 >/dev/null || qemu+=(qemu-system-x86)
compgen -G '/boot/vmlinuz-*' >/dev/null || qemu+=(linux-image-amd64)
if [ ${#qemu[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${qemu[@]}" >/dev/null
fi
