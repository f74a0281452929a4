// SPDX-License-Identifier: GPL-2.0
// bench/policy_cost.py's "redirect" paths: a tc program on a switch-side
// veth end that hands every frame to the other VM's end with
// bpf_redirect_peer, no bridge. The bench builds it with clang, once per
// port, with TARGET the other switch-side end's ifindex.
//
// Built with POLICY, it first makes the default port policy's checks the
// least code can, as the kernel's cheapest path for that policy: the
// source MAC is the sending VM's (SRC_MAC), a unicast destination is the
// receiving VM's (DST_MAC), and an IPv6 frame is no router advertisement
// or redirect (ICMPv6 134, 137 right after the IPv6 header). With GUARD
// too, an IPv4 source is the sending VM's address (SRC_IP, network order
// as a word) and an ARP frame's sender MAC and address are the VM's.
// Nothing is counted: what a drop costs is not what is measured.
//
// Built with STATEFUL too (and GUARD), it then looks each IPv4 TCP or UDP
// packet's connection up in a flow table of its own (an LRU hash, both
// directions under one key) and adds it when absent, judging nothing
// more: the kernel's cheapest stateful path, beside vnet's ACLs, whose
// established connections cost a flow lookup a packet.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

static long (*bpf_redirect_peer)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect_peer;

#ifdef STATEFUL
#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)BPF_FUNC_map_update_elem;

// A connection, the lower address first.
struct flow {
	__u32 a, b;
	__u16 pa, pb;
	__u32 proto;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct flow);
	__type(value, __u64);
	__uint(max_entries, 4096);
} flows SEC(".maps");

static inline void track(struct __sk_buff *skb)
{
	unsigned char *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (data + 38 > end || *(__u16 *)(data + 12) != __builtin_bswap16(0x0800) || data[14] != 0x45)
		return;
	__u8 proto = data[23];
	if (proto != 6 && proto != 17)
		return;
	__u32 src = *(__u32 *)(data + 26), dst = *(__u32 *)(data + 30);
	__u16 sport = *(__u16 *)(data + 34), dport = *(__u16 *)(data + 36);
	struct flow f = {.a = src, .b = dst, .pa = sport, .pb = dport, .proto = proto};
	if (src > dst || (src == dst && sport > dport)) {
		f.a = dst, f.b = src, f.pa = dport, f.pb = sport;
	}
	if (!bpf_map_lookup_elem(&flows, &f)) {
		__u64 seen = 1;
		bpf_map_update_elem(&flows, &f, &seen, BPF_ANY);
	}
}
#endif

#ifdef POLICY
static const unsigned char src_mac[6] = {SRC_MAC};
static const unsigned char dst_mac[6] = {DST_MAC};

static inline int mac_is(const unsigned char *a, const unsigned char *b)
{
	return *(__u32 *)a == *(__u32 *)b && *(__u16 *)(a + 4) == *(__u16 *)(b + 4);
}

static inline int allowed(struct __sk_buff *skb)
{
	unsigned char *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (data + 14 > end || !mac_is(data + 6, src_mac))
		return 0;
	if (!(data[0] & 1) && !mac_is(data, dst_mac))
		return 0;
	__u16 proto = *(__u16 *)(data + 12);
	if (proto == __builtin_bswap16(0x86dd)) {
		if (data + 55 > end)
			return 1;
		return !(data[20] == 58 && (data[54] == 134 || data[54] == 137));
	}
#ifdef GUARD
	if (proto == __builtin_bswap16(0x0800))
		return data + 34 <= end && *(__u32 *)(data + 26) == SRC_IP;
	if (proto == __builtin_bswap16(0x0806))
		return data + 42 <= end && mac_is(data + 22, src_mac) && *(__u32 *)(data + 28) == SRC_IP;
#endif
	return 1;
}
#endif

__attribute__((section("tc"), used)) int redirect(struct __sk_buff *skb)
{
#ifdef POLICY
	if (!allowed(skb))
		return TC_ACT_SHOT;
#endif
#ifdef STATEFUL
	track(skb);
#endif
	return bpf_redirect_peer(TARGET, 0);
}

char LICENSE[] __attribute__((section("license"), used)) = "GPL";
