#!/bin/sh
# The walk-through of docs/operations.md on one machine: apply, inspect,
# diff, change, read the history, roll back, snapshot, destroy, and restore
# into a fresh state directory with the same VNIs, MACs and addresses. Run
# as root from the repository after `make build`:
#   scripts/operations-walkthrough.sh [bin/vnet [INFRA]]
# INFRA names the infrastructure (default: shop- and a random suffix, so
# that it meets no one else's); the script removes only what it made.
set -eu
VNET=$(realpath "${1:-bin/vnet}")
INFRA=${2:-shop-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')}
WORK=$(mktemp -d /tmp/vnet-operations.XXXXXX)
STATE=$WORK/state
v() { "$VNET" --state-dir "$STATE" "$@"; }
step() { printf '\n== %s\n' "$*"; }
# expect STATUS CMD...: run CMD, which must exit with STATUS.
expect() {
	want=$1
	shift
	rc=0
	"$@" || rc=$?
	if [ "$rc" != "$want" ]; then
		echo "walk-through: $* exited $rc, want $want" >&2
		exit 1
	fi
}

cleanup() {
	v destroy "$INFRA" >/dev/null 2>&1 || true
	"$VNET" --state-dir "$WORK/fresh" destroy "$INFRA" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# The example under this run's name, and an edited copy: web2 moves to
# another address.
sed "s/^name: shop$/name: $INFRA/" examples/operations/shop.yaml >"$WORK/shop.yaml"
sed 's|10.60.0.12/24|10.60.0.22/24|' "$WORK/shop.yaml" >"$WORK/edited.yaml"

# --8<-- walkthrough
step "vnet apply: generation 1"
v apply "$WORK/shop.yaml"

step "vnet get: the spec as stored, with the VNI and the MACs vnet chose"
v get "$INFRA" | tee "$WORK/applied.yaml"

step "vnet diff with the file applied: nothing differs, exit 0"
expect 0 v diff "$INFRA" "$WORK/shop.yaml"

step "vnet diff with the edited file, and its kernel plan: exit 1"
expect 1 v diff "$INFRA" "$WORK/edited.yaml" --plan

step "vnet apply of the edited file: generation 2"
v apply "$WORK/edited.yaml"

step "vnet history: who changed what, when"
v history "$INFRA"

step "vnet diff between generations: what going back to 1 changes"
expect 1 v diff "$INFRA" --to 1

step "vnet rollback: generation 1's spec as generation 3"
v rollback "$INFRA"
expect 0 v diff "$INFRA" "$WORK/shop.yaml"
v history "$INFRA"

step "vnet describe: one VM, its ports in the kernel, counters and events"
v exec web2 -- vnet netserver >/dev/null
v exec web1 -- vnet netperf -H 10.60.0.12 -l 1 -t TCP_RR >/dev/null
echo "web1 reaches web2"
v describe "$INFRA" vm web2

step "vnet snapshot, then destroy"
v snapshot "$INFRA" "$WORK/shop.snap"
v destroy "$INFRA"

step "vnet restore into a fresh state directory"
"$VNET" --state-dir "$WORK/fresh" restore "$WORK/shop.snap"
"$VNET" --state-dir "$WORK/fresh" get "$INFRA" >"$WORK/restored.yaml"
cmp "$WORK/applied.yaml" "$WORK/restored.yaml"
echo "the restored spec is the one applied: same VNI, MACs and addresses"
"$VNET" --state-dir "$WORK/fresh" exec web2 -- vnet netserver >/dev/null
"$VNET" --state-dir "$WORK/fresh" exec web1 -- vnet netperf -H 10.60.0.12 -l 1 -t TCP_RR >/dev/null
echo "web1 reaches web2 again"
"$VNET" --state-dir "$WORK/fresh" history "$INFRA"
"$VNET" --state-dir "$WORK/fresh" destroy "$INFRA"
# -->8--
echo
echo "walk-through done"
