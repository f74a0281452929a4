// SPDX-License-Identifier: GPL-2.0
// bench/policy_cost.py's "redirect" path: a tc program on a switch-side
// veth end that hands every frame to the other VM's end with
// bpf_redirect_peer, no bridge and no checks. The bench builds it with
// clang, once per port, with TARGET the other switch-side end's ifindex.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

static long (*bpf_redirect_peer)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect_peer;

__attribute__((section("tc"), used)) int redirect(struct __sk_buff *skb)
{
	return bpf_redirect_peer(TARGET, 0);
}

char LICENSE[] __attribute__((section("license"), used)) = "GPL";
