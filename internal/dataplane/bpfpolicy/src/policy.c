// SPDX-License-Identifier: GPL-2.0
//
// Switch ports' security policies and ACLs, run by tc (cls_bpf, direct
// action) on the switch-side end of each vNIC's veth pair (or its TAP):
// port_from_vm in a port's ingress hook sees every frame the VM sends,
// before the bridge learns or forwards it; port_to_vm in its egress hook
// every frame the bridge sends the VM.
//
// One pair of programs serves every port of a host's namespace: a port's
// policy is data, in maps keyed by the port's interface index (its
// settings in ports; its counters, ACL rules and flow table in maps of its
// own, reached through the *_of maps), so that a port costs map writes and
// two tc filters rather than a load the verifier checks. ACL rules are
// walked by a connection's first packet only: later ones find it in the
// port's flow table.
//
// A unicast frame for the MAC of another port of the same bridge that
// takes frames directly (fdb) is handed to that port's VM here, past the
// bridge (bpf_redirect_peer), after the receiving port's own checks.
//
// Build: go generate ./internal/dataplane/bpfpolicy (clang; the object and
// its Go bindings are committed, so a build of vnet needs no clang).

#include <linux/bpf.h>
#include <linux/pkt_cls.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define __array(name, val) typeof(val) *name[]
#define always_inline inline __attribute__((always_inline))
// A global function the verifier checks once, on its own, rather than
// again along every path that reaches each call: without them the ACL's
// program took 60,000 instructions and 65 ms to verify.
#define verified_once __attribute__((noinline))

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, u64 flags) = (void *)BPF_FUNC_map_update_elem;
// The coarse clock (a tick's resolution, plenty for timeouts of seconds)
// costs a few ns; bpf_ktime_get_ns cost 150 ns a packet in a VM here.
static u64 (*bpf_ktime_get_coarse_ns)(void) = (void *)BPF_FUNC_ktime_get_coarse_ns;
// jiffies: the verifier turns the helper into one load of the kernel's
// tick count on 64-bit machines, which the fast path reads every frame.
static u64 (*bpf_jiffies64)(void) = (void *)BPF_FUNC_jiffies64;
static long (*bpf_skb_pull_data)(struct __sk_buff *skb, u32 len) = (void *)BPF_FUNC_skb_pull_data;
static long (*bpf_loop)(u32 nr, void *fn, void *ctx, u64 flags) = (void *)BPF_FUNC_loop;
static long (*bpf_redirect_peer)(u32 ifindex, u64 flags) = (void *)BPF_FUNC_redirect_peer;
static long (*bpf_clone_redirect)(struct __sk_buff *skb, u32 ifindex, u64 flags) = (void *)BPF_FUNC_clone_redirect;
static long (*bpf_skb_store_bytes)(struct __sk_buff *skb, u32 off, const void *from, u32 len, u64 flags) = (void *)BPF_FUNC_skb_store_bytes;

#define bswap16(x) __builtin_bswap16(x)
#define ETH_IP 0x0800
#define ETH_ARP 0x0806
#define ETH_IP6 0x86dd
#define ETH_8021Q 0x8100
#define ETH_8021AD 0x88a8

// What a port's policy checks (port.flags).
#define F_GUARD_MAC 1
#define F_GUARD_IP 2
#define F_GUARD_RA 4
#define F_UNICAST 8
#define F_ACL 16
#define F_DENY 32

// Counters, one per check and one per ACL rule from C_RULE0 on; the Go
// side names them.
#define C_FORGED 0
#define C_ARP 1
#define C_IP 2
#define C_ND 3
#define C_STACKED 4
#define C_RA 5
#define C_UNICAST 6
#define C_DEFAULT 7

#define MAX_ADDRS 8

// How many ports one namespace's programs serve (the maps' size).
#define MAX_PORTS 16384

// How many counters they hold, of all the ports: room for a thousand
// ports with ACLs of a thousand rules, twice over while policies change.
#define MAX_COUNTS (1 << 21)

// The protocols the ACL's rules are kept apart by.
#define PART_TCP 0
#define PART_UDP 1
#define PART_ICMP 2
#define PART_ICMP6 3
#define PART_OTHER 4
#define PARTS 5

#define SEC_NS 1000000000ULL

// How often a port whose frames go past the bridge lets the bridge learn
// its MAC again from a copy, in ticks (jiffies): well within the bridge's
// ageing time (300 s by default), so that frames for it from elsewhere are
// not flooded. 10,000 ticks are 10 s at the most frequent tick Linux has
// (HZ 1000) and 100 s at the least (HZ 100).
#define LEARN_TICKS 10000

// A port's settings, written by vnet.
struct port {
	u8 mac[6];
	u8 flags;
	u8 n4;
	u8 n6;
	// direct: other ports of its bridge may hand it frames for its MAC
	// past the bridge (a veth whose far end is in another namespace, with
	// nothing else on its egress, such as a shaper).
	u8 direct;
	u16 pad;
	// The interface index of the port's bridge: the fast path joins only
	// ports of one bridge. 0: the port neither hands nor takes frames
	// past the bridge.
	u32 bridge;
	// The generation of the port's counters and rules (their key in
	// counts and rules_of): a policy whose rules change writes new ones
	// beside the old and then switches the port over in one write; one
	// whose rules stay keeps them, and its counts go on.
	u32 gen;
	// The rules a packet is judged by, by its direction (to the VM or
	// from it) and protocol (PART_*): where they start in the port's
	// rules, and how many there are. A rule for any protocol is in each
	// of its direction's parts, in order, so a part holds its packets'
	// first match; a connection's first packet walks only its part.
	u32 part[2 * PARTS][2];
	u32 ip4[MAX_ADDRS];
	u8 ip6[MAX_ADDRS][16];
	// When the bridge last learned the MAC from a copy (jiffies; written
	// by the programs alone). Builds that counted it in ns share this map
	// while a namespace runs both: either reading the other's figure as
	// its own lets the bridge learn once more, which is harmless.
	u64 learned;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, u32);
	__type(value, struct port);
	__uint(max_entries, MAX_PORTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} ports SEC(".maps");

// What vnet found of the kernel, for all the ports: whether frames go past
// the bridge at all (fast_path 1; 2 where the kernel cannot, 0 before vnet
// has found out), which needs the VM's vNIC to count the frames it is
// handed that way (Linux 6.7).
struct kernel_settings {
	u32 fast_path;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, u32);
	__type(value, struct kernel_settings);
	__uint(max_entries, 1);
} settings SEC(".maps");

// The ports that take frames directly, by bridge and MAC.
struct fdb_key {
	u32 bridge;
	u8 mac[6];
	u16 pad;
};

// A port that takes frames directly, as its listing says: a frame for a
// port without an ACL is handed over on the listing alone, one lookup
// rather than two (its settings'), which was most of what the fast path
// cost beyond the least code making the same checks. vnet takes a port
// off the list before any change to its bridge, MAC, taking frames
// directly or having an ACL, and lists it again after, so a listing never
// says less than the port's settings.
struct fdb_port {
	u32 port; // the port's interface index
	u32 acl;  // 1: it has an ACL; its settings are read to judge the frame
};

// Named apart from an earlier build's map of the same purpose (whose
// value was the index alone): a build tells its own programs by their
// maps' names.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct fdb_key);
	__type(value, struct fdb_port);
	__uint(max_entries, MAX_PORTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} direct_ports SEC(".maps");

struct rule {
	u32 counter;
	u8 allow, in, proto, family; // proto, family: 0 for any
	u16 sport, dport;            // host order, 0 for any
	u32 pad;
	u32 src[4], smask[4], dst[4], dmask[4]; // network order; IPv4 in the first word
};

// A connection, its two ends in a canonical order so that both directions
// find the same entry: for ICMP echo the requester first (a request the
// other way is another connection, as for the kernel's connection
// tracking), else the lower address (and port).
struct conn {
	u32 a[4], b[4];
	u16 pa, pb;
	u8 proto, family;
	u16 pad;
};

// clang leaves struct conn out of the object's BTF, where the loader
// needs it to make the flow tables, unless a variable has the type.
const volatile struct conn conn_btf = {};

// The fragments of a packet whose first fragment passed: the later ones
// carry no ports to judge them by, and pass with it.
struct frag {
	u32 src[4], dst[4];
	u32 id;
	u8 proto, family;
	u16 pad;
};

// A port's counters: one per check and one per ACL rule, by port,
// generation and index, in one table of all the ports. They count drops
// and connections, not every frame, so a shared entry added to atomically
// costs little; and a plain hash table, unlike a map of maps, is written
// without waiting for the programs running on every CPU (synchronize_rcu),
// which took milliseconds a port.
struct count_key {
	u32 port, gen, idx;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct count_key);
	__type(value, u64);
	__uint(max_entries, MAX_COUNTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} counts SEC(".maps");

// A port's own maps: its ACL's rules, and its flow and fragment tables
// (the value is when the entry expires, ktime ns). These are their
// templates, of one entry each: the kernel compares a port's maps with
// them by type and sizes of key and value, and BPF_F_INNER_MAP lets the
// arrays' lengths differ. Only ports with an ACL have them.
struct rules_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, u32);
	__type(value, struct rule);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_INNER_MAP);
} rules_map SEC(".maps");

struct frags_map {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct frag);
	__type(value, u64);
	__uint(max_entries, 1);
} frags_map SEC(".maps");

struct flows_map {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct conn);
	__type(value, u64);
	__uint(max_entries, 1);
} flows_map SEC(".maps");

// A port's rules by port and generation.
struct gen_key {
	u32 port, gen;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, struct gen_key);
	__uint(max_entries, 2 * MAX_PORTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__array(values, struct rules_map);
} rules_of SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, u32);
	__uint(max_entries, MAX_PORTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__array(values, struct flows_map);
} flows_of SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, u32);
	__uint(max_entries, MAX_PORTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__array(values, struct frags_map);
} frags_of SEC(".maps");

static always_inline void count(u32 port, const struct port *cfg, u32 c)
{
	struct count_key k = {.port = port, .gen = cfg->gen, .idx = c};
	u64 *n = bpf_map_lookup_elem(&counts, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
}

static always_inline int drop(u32 port, const struct port *cfg, u32 c)
{
	count(port, cfg, c);
	return TC_ACT_SHOT;
}

// The packet as the checks and the ACL see it.
struct pkt {
	u8 family, proto, icmp_type, ext; // ext: IPv6 extension headers precede proto
	u8 has_l4, has_ports;
	u8 echo; // ICMP echo: 1 a request, 2 a reply
	u8 frag; // 1: a first fragment with more to come, 2: a later one
	u32 frag_id;
	u16 sport, dport; // host order
	u32 l4;           // offset of the transport header
	u32 src[4], dst[4];
};

// at returns a pointer to len bytes at off in the packet, pulling them
// into the linear part when they are not there yet, or 0 when the packet
// is shorter. off must be below 256 (all the headers read here are).
static always_inline u8 *at(struct __sk_buff *skb, u32 off, u32 len)
{
	off &= 0xff;
	u8 *d = (u8 *)(long)skb->data;
	u8 *p = d + off;
	if ((void *)(p + len) <= (void *)(long)skb->data_end)
		return p;
	if (off + len > skb->len)
		return 0;
	bpf_skb_pull_data(skb, off + len);
	d = (u8 *)(long)skb->data;
	p = d + off;
	if ((void *)(p + len) <= (void *)(long)skb->data_end)
		return p;
	return 0;
}

static always_inline int mac_eq(const u8 *a, const u8 *b)
{
	return *(const u32 *)a == *(const u32 *)b && *(const u16 *)(a + 4) == *(const u16 *)(b + 4);
}

static always_inline int ip4_allowed(const struct port *cfg, u32 a)
{
#pragma unroll
	for (int i = 0; i < MAX_ADDRS; i++)
		if (i < cfg->n4 && cfg->ip4[i] == a)
			return 1;
	return 0;
}

static always_inline int ip6_allowed(const struct port *cfg, const u32 *a)
{
#pragma unroll
	for (int i = 0; i < MAX_ADDRS; i++) {
		if (i >= cfg->n6)
			break;
		const u32 *w = (const u32 *)cfg->ip6[i];
		if (w[0] == a[0] && w[1] == a[1] && w[2] == a[2] && w[3] == a[3])
			return 1;
	}
	return 0;
}

// parse reads the IP header at 14 and what follows it: the transport
// protocol behind up to four IPv6 extension headers, ports, ICMP type. It
// returns 0 for anything that is not IPv4 or IPv6, or too short.
verified_once int parse(struct __sk_buff *skb, u32 eth, struct pkt *p)
{
	if (!p)
		return 0;
	if (eth == ETH_IP) {
		u8 *ip = at(skb, 14, 20);
		if (!ip)
			return 0;
		p->family = 4;
		p->proto = ip[9];
		p->src[0] = *(u32 *)(ip + 12);
		p->dst[0] = *(u32 *)(ip + 16);
		p->l4 = 14 + (ip[0] & 0xf) * 4;
		// A fragment after the first carries no transport header.
		u16 fo = bswap16(*(u16 *)(ip + 6));
		p->has_l4 = (fo & 0x1fff) == 0;
		p->frag = fo & 0x1fff ? 2 : (fo & 0x2000 ? 1 : 0);
		p->frag_id = *(u16 *)(ip + 4);
	} else if (eth == ETH_IP6) {
		u8 *ip = at(skb, 14, 40);
		if (!ip)
			return 0;
		p->family = 6;
		__builtin_memcpy(p->src, ip + 8, 16);
		__builtin_memcpy(p->dst, ip + 24, 16);
		u8 next = ip[6];
		u32 off = 14 + 40;
		p->has_l4 = 1;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			if (next != 0 && next != 43 && next != 44 && next != 60 && next != 51)
				break;
			p->ext = 1;
			u8 *h = off < 200 ? at(skb, off, 8) : 0;
			if (!h) {
				p->has_l4 = 0;
				break;
			}
			u8 nh = h[0];
			if (next == 44) { // fragment: 8 bytes
				u16 fo = bswap16(*(u16 *)(h + 2));
				if (fo & 0xfff8)
					p->has_l4 = 0;
				p->frag = fo & 0xfff8 ? 2 : (fo & 1 ? 1 : 0);
				p->frag_id = *(u32 *)(h + 4);
				off += 8;
			} else if (next == 51) { // AH: (len+2)*4
				off += ((u32)h[1] + 2) * 4;
			} else {
				off += ((u32)h[1] + 1) * 8;
			}
			next = nh;
		}
		if (next == 0 || next == 43 || next == 44 || next == 60 || next == 51)
			p->has_l4 = 0; // more than four: left unread
		p->proto = next;
		p->l4 = off;
	} else {
		return 0;
	}
	if (!p->has_l4 || p->l4 >= 200)
		return 1;
	if (p->proto == 6 || p->proto == 17) {
		u8 *th = at(skb, p->l4, 4);
		if (!th)
			return 1;
		p->sport = bswap16(*(u16 *)th);
		p->dport = bswap16(*(u16 *)(th + 2));
		p->has_ports = 1;
	} else if (p->proto == 1 || p->proto == 58) {
		u8 *ic = at(skb, p->l4, 8);
		if (!ic)
			return 1;
		p->icmp_type = ic[0];
		// Echo requests and replies are one connection by their id.
		if (ic[0] == 8 || ic[0] == 0 || ic[0] == 128 || ic[0] == 129) {
			p->sport = p->dport = bswap16(*(u16 *)(ic + 4));
			p->has_ports = 1;
			p->echo = ic[0] == 8 || ic[0] == 128 ? 1 : 2;
		}
	}
	return 1;
}

// The neighbour discovery messages (ICMPv6 types).
#define ND_RS 133
#define ND_RA 134
#define ND_NS 135
#define ND_NA 136
#define ND_REDIRECT 137

// nd_spoofed checks a neighbour discovery message from the VM: no
// extension headers, the target of an advertisement one of the port's
// addresses, and at most one option, whose link-layer address is the MAC.
static always_inline int nd_spoofed(struct __sk_buff *skb, const struct port *cfg, struct pkt *p)
{
	u8 t = p->icmp_type;
	if (t < ND_RS || t > ND_REDIRECT)
		return 0;
	if (p->ext)
		return 1;
	if (t == ND_NA) {
		u8 *tg = at(skb, 14 + 40 + 8, 16);
		if (!tg)
			return 1;
		u32 target[4];
		__builtin_memcpy(target, tg, 16);
		if (!ip6_allowed(cfg, target))
			return 1;
	}
	if (t != ND_RS && t != ND_NS && t != ND_NA)
		return 0;
	u32 opts = t == ND_RS ? 8 : 24;
	u8 *ip = at(skb, 14, 40);
	if (!ip)
		return 1;
	u16 plen = bswap16(*(u16 *)(ip + 4));
	if (plen > opts + 8)
		return 1;
	if (plen < opts + 8)
		return 0;
	u8 *opt = at(skb, 14 + 40 + opts, 8);
	if (!opt)
		return 1;
	return (opt[0] == 1 || opt[0] == 2) && !mac_eq(opt + 2, cfg->mac);
}

static always_inline int icmp_error(struct pkt *p)
{
	if (p->proto == 1)
		return p->icmp_type == 3 || p->icmp_type == 4 || p->icmp_type == 5 || p->icmp_type == 11 || p->icmp_type == 12;
	return p->proto == 58 && p->icmp_type >= 1 && p->icmp_type <= 4;
}

static always_inline void flow_of(struct pkt *p, struct conn *f)
{
	__builtin_memset(f, 0, sizeof(*f));
	f->proto = p->proto;
	f->family = p->family;
	int swap = 0;
	if (p->echo)
		swap = p->echo == 2;
	else if (p->src[0] != p->dst[0])
		swap = p->src[0] > p->dst[0];
	else if (p->src[1] != p->dst[1])
		swap = p->src[1] > p->dst[1];
	else if (p->src[2] != p->dst[2])
		swap = p->src[2] > p->dst[2];
	else if (p->src[3] != p->dst[3])
		swap = p->src[3] > p->dst[3];
	else
		swap = p->sport > p->dport;
	if (swap) {
		__builtin_memcpy(f->a, p->dst, 16);
		__builtin_memcpy(f->b, p->src, 16);
		f->pa = p->dport;
		f->pb = p->sport;
	} else {
		__builtin_memcpy(f->a, p->src, 16);
		__builtin_memcpy(f->b, p->dst, 16);
		f->pa = p->sport;
		f->pb = p->dport;
	}
}

// lifetime is how long a connection stays known after its last packet, as
// the kernel's connection tracking keeps them: TCP until it closes, UDP two
// minutes, ICMP 30 s, other protocols ten.
static always_inline u64 lifetime(struct __sk_buff *skb, struct pkt *p)
{
	if (p->proto == 6) {
		u8 *th = p->has_ports ? at(skb, p->l4, 14) : 0;
		if (th && (th[13] & 0x05)) // FIN or RST
			return 120 * SEC_NS;
		return 432000 * SEC_NS;
	}
	if (p->proto == 17)
		return 120 * SEC_NS;
	if (p->proto == 1 || p->proto == 58)
		return 30 * SEC_NS;
	return 600 * SEC_NS;
}

// known finds the packet's connection in a port's flow table and keeps it
// alive; an entry is written at most once a second, not by every packet.
static always_inline int known(void *flows, struct __sk_buff *skb, struct pkt *p)
{
	struct conn f;
	flow_of(p, &f);
	u64 *exp = bpf_map_lookup_elem(flows, &f);
	if (!exp)
		return 0;
	u64 now = bpf_ktime_get_coarse_ns();
	if (*exp < now)
		return 0;
	u64 next = now + lifetime(skb, p);
	if (next > *exp + SEC_NS || next < *exp)
		*exp = next;
	return 1;
}

static always_inline void remember(void *flows, struct __sk_buff *skb, struct pkt *p)
{
	struct conn f;
	flow_of(p, &f);
	u64 exp = bpf_ktime_get_coarse_ns() + lifetime(skb, p);
	bpf_map_update_elem(flows, &f, &exp, BPF_ANY);
}

// related reports whether an ICMP error is about a known connection of
// the port: the packet it quotes, seen from the other side.
verified_once int related(struct __sk_buff *skb, struct pkt *p, u32 port)
{
	if (!p)
		return 0;
	struct pkt in = {};
	u32 off = p->l4 + 8;
	if (off >= 200)
		return 0;
	in.family = p->family;
	if (p->family == 4) {
		u8 *ip = at(skb, off, 28);
		if (!ip || (ip[0] & 0xf) != 5)
			return 0;
		in.proto = ip[9];
		in.src[0] = *(u32 *)(ip + 12);
		in.dst[0] = *(u32 *)(ip + 16);
		if (in.proto == 6 || in.proto == 17) {
			in.sport = bswap16(*(u16 *)(ip + 20));
			in.dport = bswap16(*(u16 *)(ip + 22));
		} else if (in.proto == 1 && (ip[20] == 8 || ip[20] == 0)) {
			in.sport = in.dport = bswap16(*(u16 *)(ip + 24));
			in.echo = ip[20] == 8 ? 1 : 2;
		}
	} else {
		u8 *ip = at(skb, off, 48);
		if (!ip)
			return 0;
		in.proto = ip[6];
		__builtin_memcpy(in.src, ip + 8, 16);
		__builtin_memcpy(in.dst, ip + 24, 16);
		if (in.proto == 6 || in.proto == 17) {
			in.sport = bswap16(*(u16 *)(ip + 40));
			in.dport = bswap16(*(u16 *)(ip + 42));
		} else if (in.proto == 58 && (ip[40] == 128 || ip[40] == 129)) {
			in.sport = in.dport = bswap16(*(u16 *)(ip + 44));
			in.echo = ip[40] == 128 ? 1 : 2;
		}
	}
	void *flows = bpf_map_lookup_elem(&flows_of, &port);
	if (!flows)
		return 0;
	struct conn f;
	flow_of(&in, &f);
	return bpf_map_lookup_elem(flows, &f) != 0;
}

static always_inline void frag_of(struct pkt *p, struct frag *f)
{
	__builtin_memset(f, 0, sizeof(*f));
	__builtin_memcpy(f->src, p->src, 16);
	__builtin_memcpy(f->dst, p->dst, 16);
	f->id = p->frag_id;
	f->proto = p->proto;
	f->family = p->family;
}

static always_inline int frag_known(u32 port, struct pkt *p)
{
	void *frags = bpf_map_lookup_elem(&frags_of, &port);
	if (!frags)
		return 0;
	struct frag f;
	frag_of(p, &f);
	u64 *exp = bpf_map_lookup_elem(frags, &f);
	return exp && *exp >= bpf_ktime_get_coarse_ns();
}

static always_inline void remember_frag(u32 port, struct pkt *p)
{
	void *frags = bpf_map_lookup_elem(&frags_of, &port);
	if (!frags)
		return;
	struct frag f;
	frag_of(p, &f);
	u64 exp = bpf_ktime_get_coarse_ns() + 30 * SEC_NS;
	bpf_map_update_elem(frags, &f, &exp, BPF_ANY);
}

struct walk {
	struct pkt *p;
	void *rules; // the port's rules
	u32 base;    // where the packet's part starts in them
	int verdict; // -1: no rule matched; else the matching rule's index
};

static always_inline u32 part_of(u8 proto)
{
	switch (proto) {
	case 6:
		return PART_TCP;
	case 17:
		return PART_UDP;
	case 1:
		return PART_ICMP;
	case 58:
		return PART_ICMP6;
	}
	return PART_OTHER;
}

static always_inline int prefix_match(const u32 *addr, const u32 *net, const u32 *mask, u8 family)
{
	if ((addr[0] & mask[0]) != net[0])
		return 0;
	if (family == 4)
		return 1;
	return (addr[1] & mask[1]) == net[1] && (addr[2] & mask[2]) == net[2] && (addr[3] & mask[3]) == net[3];
}

static long match_rule(u32 i, void *ctx)
{
	struct walk *w = ctx;
	i += w->base;
	struct rule *r = bpf_map_lookup_elem(w->rules, &i);
	if (!r)
		return 1;
	struct pkt *p = w->p;
	if (r->family && r->family != p->family)
		return 0;
	if (r->proto && r->proto != p->proto)
		return 0;
	if (r->sport || r->dport) {
		if (!p->has_ports || p->proto == 1 || p->proto == 58)
			return 0;
		if (r->sport && r->sport != p->sport)
			return 0;
		if (r->dport && r->dport != p->dport)
			return 0;
	}
	if (r->family && !prefix_match(p->src, r->src, r->smask, p->family))
		return 0;
	if (r->family && !prefix_match(p->dst, r->dst, r->dmask, p->family))
		return 0;
	w->verdict = i;
	return 1;
}

// judge walks the port's rules of the packet's part: the verdict of the
// first that matches (counted), else the default.
static always_inline int judge(u32 port, const struct port *cfg, struct pkt *p, u32 in)
{
	u32 k = (in ? PARTS : 0) + part_of(p->proto);
	if (k >= 2 * PARTS)
		return TC_ACT_SHOT;
	struct gen_key gk = {.port = port, .gen = cfg->gen};
	void *rules = bpf_map_lookup_elem(&rules_of, &gk);
	if (!rules)
		return TC_ACT_SHOT;
	struct walk w = {.p = p, .rules = rules, .base = cfg->part[k][0], .verdict = -1};
	u32 n = cfg->part[k][1];
	if (n)
		bpf_loop(n, match_rule, &w, 0);
	if (w.verdict >= 0) {
		u32 i = w.verdict;
		struct rule *r = bpf_map_lookup_elem(rules, &i);
		if (!r)
			return TC_ACT_SHOT;
		count(port, cfg, r->counter);
		if (!r->allow)
			return TC_ACT_SHOT;
	} else if (cfg->flags & F_DENY) {
		return drop(port, cfg, C_DEFAULT);
	}
	return TC_ACT_UNSPEC;
}

// The ACL's verdicts before its rules are walked (established).
#define PASSES 1 // a packet the ACL lets through without its rules
#define JUDGE 0  // one for the rules to judge (admit)

// established reads an IP packet into p and reports whether a port's ACL
// lets it through without walking its rules: packets of known connections
// (and later fragments of known first ones), ICMP errors about them, the
// IPv6 neighbour and multicast listener discovery the ACL does not judge,
// and what is not IP. It needs none of the port's settings, only its
// tables: the fast path asks it before it reads the receiver's settings,
// which only a connection's first packet needs.
verified_once int established(struct __sk_buff *skb, u32 eth, u32 port, struct pkt *p)
{
	if (!p)
		return TC_ACT_SHOT;
	if (!parse(skb, eth, p))
		return PASSES; // not IP: the ACL does not judge it
	if (p->proto == 58 && ((p->icmp_type >= 130 && p->icmp_type <= 137) || p->icmp_type == 143))
		return PASSES;
	if (p->frag == 2 && frag_known(port, p))
		return PASSES;
	void *flows = bpf_map_lookup_elem(&flows_of, &port);
	if (!flows)
		return TC_ACT_SHOT;
	if (known(flows, skb, p) || (icmp_error(p) && related(skb, p, port))) {
		if (p->frag == 1)
			remember_frag(port, p);
		return PASSES;
	}
	return JUDGE;
}

// admit judges a packet established left to the rules of a port's ACL in
// one direction (in: to the VM): the first rule that matches, or the
// default; a connection let through is remembered.
verified_once int admit(struct __sk_buff *skb, u32 in, u32 port, const struct port *cfg, struct pkt *p)
{
	if (!cfg || !p)
		return TC_ACT_SHOT;
	if (judge(port, cfg, p, in) == TC_ACT_SHOT)
		return TC_ACT_SHOT;
	void *flows = bpf_map_lookup_elem(&flows_of, &port);
	if (!flows)
		return TC_ACT_SHOT;
	if (p->frag != 2)
		remember(flows, skb, p);
	if (p->frag == 1)
		remember_frag(port, p);
	return TC_ACT_UNSPEC;
}

// acl judges an IP packet by a port's ACL in one direction (in: to the
// VM): what established lets through passes, the rest is admitted or not.
static always_inline int acl(struct __sk_buff *skb, u32 eth, u32 in, u32 port, const struct port *cfg)
{
	struct pkt p = {};
	int r = established(skb, eth, port, &p);
	if (r == PASSES)
		return TC_ACT_UNSPEC;
	if (r != JUDGE)
		return TC_ACT_SHOT;
	return admit(skb, in, port, cfg, &p);
}

// sent checks what a port's VM sends: its source MAC, addresses, router
// advertisements, then its egress ACL.
static always_inline int sent(struct __sk_buff *skb, u32 me, const struct port *cfg, u8 *eth)
{
	if ((cfg->flags & F_GUARD_MAC) && !mac_eq(eth + 6, cfg->mac))
		return drop(me, cfg, C_FORGED);
	u16 proto = bswap16(*(u16 *)(eth + 12));
	if (cfg->flags & F_GUARD_IP) {
		// The kernel takes a frame's outer 802.1Q tag off before this
		// hook; a second tag would hide the packet from the checks.
		if (proto == ETH_8021Q || proto == ETH_8021AD)
			return drop(me, cfg, C_STACKED);
		if (proto == ETH_ARP) {
			u8 *arp = at(skb, 14, 28);
			if (!arp)
				return TC_ACT_UNSPEC;
			if (!mac_eq(arp + 8, cfg->mac) || !ip4_allowed(cfg, *(u32 *)(arp + 14)))
				return drop(me, cfg, C_ARP);
		}
		if (proto == ETH_IP) {
			u8 *ip = at(skb, 14, 20);
			if (ip && !ip4_allowed(cfg, *(u32 *)(ip + 12)))
				return drop(me, cfg, C_IP);
		}
	}
	if (proto == ETH_IP6 && (cfg->flags & (F_GUARD_IP | F_GUARD_RA))) {
		struct pkt p = {};
		if (!parse(skb, proto, &p))
			return TC_ACT_UNSPEC;
		if ((cfg->flags & F_GUARD_IP) && !ip6_allowed(cfg, p.src))
			return drop(me, cfg, C_IP);
		if (p.proto == 58 && p.has_l4) {
			if ((cfg->flags & F_GUARD_IP) && nd_spoofed(skb, cfg, &p))
				return drop(me, cfg, C_ND);
			if ((cfg->flags & F_GUARD_RA) && (p.icmp_type == ND_RA || p.icmp_type == ND_REDIRECT))
				return drop(me, cfg, C_RA);
		}
	}
	if (cfg->flags & F_ACL)
		return acl(skb, proto, 0, me, cfg);
	return TC_ACT_UNSPEC;
}

// learn lets the bridge learn the sender's MAC from a copy of the frame
// addressed to the sender itself, which the bridge then drops (it never
// sends a frame back out of the port it came in by): frames that go past
// the bridge teach it nothing, and without this it would forget the MAC
// and flood what others send to it.
static always_inline void learn(struct __sk_buff *skb, struct port *cfg, u8 *dst)
{
	u64 now = bpf_jiffies64();
	if (now - cfg->learned < LEARN_TICKS)
		return;
	cfg->learned = now;
	u8 was[6];
	__builtin_memcpy(was, dst, 6);
	if (bpf_skb_store_bytes(skb, 0, cfg->mac, 6, 0))
		return;
	bpf_clone_redirect(skb, skb->ifindex, BPF_F_INGRESS);
	bpf_skb_store_bytes(skb, 0, was, 6, 0);
}

// port_from_vm: what the VM may send at all, then its egress ACL. A
// unicast frame for a port of the same bridge that takes frames directly
// is judged by that port's ingress ACL here and handed to its VM; any
// other frame that passes goes on to the port's other filters
// (TC_ACT_UNSPEC), if any, then to the bridge.
SEC("tc")
int port_from_vm(struct __sk_buff *skb)
{
	u32 me = skb->ifindex;
	struct port *cfg = bpf_map_lookup_elem(&ports, &me);
	if (!cfg)
		return TC_ACT_SHOT; // a port vnet has not set up (yet): nothing passes
	u8 *eth = at(skb, 0, 14);
	if (!eth)
		return TC_ACT_UNSPEC;
	// A copy the bridge is to learn from (see learn) is addressed to the
	// port's own MAC: checked as the frame was, it goes to the bridge.
	if (sent(skb, me, cfg, eth) == TC_ACT_SHOT)
		return TC_ACT_SHOT;
	if (!cfg->bridge)
		return TC_ACT_UNSPEC;
	u32 zero = 0;
	struct kernel_settings *set = bpf_map_lookup_elem(&settings, &zero);
	if (!set || set->fast_path != 1)
		return TC_ACT_UNSPEC;
	eth = at(skb, 0, 14);
	if (!eth || (eth[0] & 1))
		return TC_ACT_UNSPEC;
	struct fdb_key k = {.bridge = cfg->bridge};
	__builtin_memcpy(k.mac, eth, 6);
	struct fdb_port *to = bpf_map_lookup_elem(&direct_ports, &k);
	if (!to || to->port == me)
		return TC_ACT_UNSPEC;
	u32 peer = to->port;
	if (to->acl) {
		// For its MAC, so through its unicast filter, then its ACL: a
		// known connection's packet on the listing alone, as a port
		// without an ACL takes every frame; a new one by its settings.
		struct pkt p = {};
		int r = established(skb, bswap16(*(u16 *)(eth + 12)), peer, &p);
		if (r != PASSES && r != JUDGE)
			return TC_ACT_SHOT;
		if (r == JUDGE) {
			struct port *pc = bpf_map_lookup_elem(&ports, &peer);
			if (!pc || !pc->direct || pc->bridge != cfg->bridge || !mac_eq(pc->mac, k.mac))
				return TC_ACT_UNSPEC;
			if ((pc->flags & F_ACL) && admit(skb, 1, peer, pc, &p) == TC_ACT_SHOT)
				return TC_ACT_SHOT;
		}
	}
	eth = at(skb, 0, 14);
	if (!eth)
		return TC_ACT_SHOT;
	learn(skb, cfg, eth);
	return bpf_redirect_peer(peer, 0);
}

// port_to_vm: unicast for other MACs stays out (promiscuous mode and MAC
// changes rejected), then the VM's ingress ACL.
SEC("tc")
int port_to_vm(struct __sk_buff *skb)
{
	u32 me = skb->ifindex;
	struct port *cfg = bpf_map_lookup_elem(&ports, &me);
	if (!cfg)
		return TC_ACT_SHOT;
	u8 *eth = at(skb, 0, 14);
	if (!eth)
		return TC_ACT_UNSPEC;
	if ((cfg->flags & F_UNICAST) && !(eth[0] & 1) && !mac_eq(eth, cfg->mac))
		return drop(me, cfg, C_UNICAST);
	if (cfg->flags & F_ACL)
		return acl(skb, bswap16(*(u16 *)(eth + 12)), 1, me, cfg);
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
