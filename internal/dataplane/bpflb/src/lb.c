// SPDX-License-Identifier: GPL-2.0
//
// The load balancers a client sees, translated on its switch port: tc
// (cls_bpf, direct action) runs lb_from_vm in the port's ingress hook, on
// every frame the client sends before the bridge sees it, and lb_to_vm in
// its egress hook, on every frame the bridge sends the client.
//
// lb_from_vm answers ARP requests and IPv6 neighbour solicitations for a
// VIP itself, with the VIP's MAC, and sends a connection to a VIP's
// listener to a backend: the destination address, port and MAC become the
// backend's, so the frame leaves the host (or reaches a local backend)
// with no extra hop, and the backend sees the client's own address. Other
// IP traffic to a VIP is dropped. A connection keeps its backend (ct):
// only a TCP SYN, or a UDP datagram whose backend went down, chooses
// again. lb_to_vm translates the backends' replies back (rev): the source
// becomes the VIP, its port the listener's and its MAC the VIP's.
//
// A backend is chosen by a hash of the connection (or of the client's
// address, with source affinity) into its load balancer's table of slots,
// which user space fills from the backends that are up (Maglev), so a
// backend going down moves only its own slots.
//
// Build: go generate ./internal/dataplane/bpflb (clang; the object and
// its Go bindings are committed, so a build of vnet needs no clang).

#include <linux/bpf.h>
#include <linux/pkt_cls.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s64 s64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define always_inline inline __attribute__((always_inline))

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, u64 flags) = (void *)BPF_FUNC_map_update_elem;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_delete_elem;
static u64 (*bpf_ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;
static long (*bpf_skb_load_bytes)(const struct __sk_buff *skb, u32 offset, void *to, u32 len) = (void *)BPF_FUNC_skb_load_bytes;
static long (*bpf_skb_store_bytes)(struct __sk_buff *skb, u32 offset, const void *from, u32 len, u64 flags) = (void *)BPF_FUNC_skb_store_bytes;
static long (*bpf_l3_csum_replace)(struct __sk_buff *skb, u32 offset, u64 from, u64 to, u64 size) = (void *)BPF_FUNC_l3_csum_replace;
static long (*bpf_l4_csum_replace)(struct __sk_buff *skb, u32 offset, u64 from, u64 to, u64 flags) = (void *)BPF_FUNC_l4_csum_replace;
static s64 (*bpf_csum_diff)(void *from, u32 from_size, void *to, u32 to_size, u32 seed) = (void *)BPF_FUNC_csum_diff;
static long (*bpf_redirect)(u32 ifindex, u64 flags) = (void *)BPF_FUNC_redirect;
static long (*bpf_skb_change_tail)(struct __sk_buff *skb, u32 len, u64 flags) = (void *)BPF_FUNC_skb_change_tail;

#define bswap16(x) __builtin_bswap16(x)
#define ETH_IP 0x0800
#define ETH_ARP 0x0806
#define ETH_IP6 0x86dd
#define PROTO_TCP 6
#define PROTO_UDP 17
#define PROTO_ICMP6 58
#define NONE 0xffffffff
#define RETRIES 4 // slots tried past a backend that is the client itself
#define UDP_IDLE_NS (120ULL * 1000000000) // a UDP flow quiet this long is over

#define ETH_LEN 14
#define IP6_LEN 40

// A service is one listener of a load balancer on one of its VIPs.
struct svc_key {
	u8 addr[16]; // IPv4 in the first four bytes
	u16 port;    // network order
	u8 proto, family;
};

struct svc {
	u32 lb;          // the load balancer's index
	u32 first_slot;  // its family's slots
	u32 nslots;
	u32 group;       // its load balancer's family: the affinity's scope
	u16 backend_port; // network order
	u8 source;       // method source: slots by the client's address, kept for affinity_ns
	u8 pad;
	u32 pad2;
	u64 affinity_ns;
};

struct vip_key {
	u8 addr[16];
	u8 family;
	u8 pad[3];
};

struct vip {
	u8 mac[6];
	u8 pad[2];
};

struct backend {
	u8 addr[16];
	u8 mac[6];
	u8 up, family;
	u32 lb;
	char lb_name[32]; // for user space: which load balancer a backend is down in
};

struct ct_key {
	u8 client[16], vip[16];
	u16 cport, vport;
	u8 proto, family;
	u16 pad;
};

struct ct_val {
	u8 addr[16]; // the backend's
	u8 mac[6];
	u16 port;
	u32 backend; // its index in backends when chosen
	u8 closed;   // the client sent a FIN or a reset: not active
	u8 pad[3];
	u64 seen;
};

struct rev_key {
	u8 backend[16], client[16];
	u16 bport, cport;
	u8 proto, family;
	u16 pad;
};

struct rev_val {
	u8 vip[16];
	u8 mac[6];
	u16 vport;
};

struct aff_key {
	u8 client[16];
	u32 group;
};

struct aff_val {
	u8 addr[16];
	u32 backend;
	u32 pad;
	u64 seen;
};

struct conn_key {
	u8 addr[16], vip[16];
	u16 port;
	u8 proto, family;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct svc_key);
	__type(value, struct svc);
	__uint(max_entries, 1);
} services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct vip_key);
	__type(value, struct vip);
	__uint(max_entries, 1);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, u32);
	__type(value, struct backend);
	__uint(max_entries, 1);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, u32);
	__type(value, u32);
	__uint(max_entries, 1);
} slots SEC(".maps");

// The state that outlives a change of configuration: user space hands
// these maps to the next programs.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct_key);
	__type(value, struct ct_val);
	__uint(max_entries, 2048);
} ct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct rev_key);
	__type(value, struct rev_val);
	__uint(max_entries, 2048);
} rev SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct aff_key);
	__type(value, struct aff_val);
	__uint(max_entries, 512);
} aff SEC(".maps");

// Connections sent to each backend (address and port) from each VIP, since
// the port's programs were first loaded.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct conn_key);
	__type(value, u64);
	__uint(max_entries, 1024);
} conns SEC(".maps");

static always_inline u32 rotl(u32 x, u32 r) { return (x << r) | (x >> (32 - r)); }

// mix and fmix are MurmurHash3's rounds: every input bit moves every
// output bit, so consecutive client ports land on unrelated slots.
static always_inline u32 mix(u32 h, u32 k)
{
	k *= 0xcc9e2d51;
	k = rotl(k, 15);
	k *= 0x1b873593;
	h ^= k;
	h = rotl(h, 13);
	return h * 5 + 0xe6546b64;
}

static always_inline u32 fmix(u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

// The helpers below copy through locals: the verifier refuses a load or
// store on the stack that is not aligned to its size, and byte arrays in
// frames and keys are aligned to nothing in particular.
static always_inline u32 hash_addr(u32 h, const u8 *a)
{
	u32 w[4];
	__builtin_memcpy(w, a, 16);
	h = mix(h, w[0]);
	h = mix(h, w[1]);
	h = mix(h, w[2]);
	return mix(h, w[3]);
}

static always_inline int same_addr(const u8 *a, const u8 *b)
{
	u64 x[2], y[2];
	__builtin_memcpy(x, a, 16);
	__builtin_memcpy(y, b, 16);
	return x[0] == y[0] && x[1] == y[1];
}

static always_inline u16 get16(const u8 *p)
{
	u16 v;
	__builtin_memcpy(&v, p, 2);
	return v;
}

static always_inline void put16(u8 *p, u16 v) { __builtin_memcpy(p, &v, 2); }

#define copy16(dst, src) __builtin_memcpy(dst, src, 16)
#define copy6(dst, src) __builtin_memcpy(dst, src, 6)

// A frame's addresses and ports, as the programs read them.
struct pkt {
	u8 src[16], dst[16]; // IPv4 in the first four bytes, the rest zero
	u16 sport, dport;    // network order
	u8 proto, family, syn, fin; // fin: a TCP FIN or reset
	u8 rst, pad3[3];
	u32 l3, l4;          // offsets of the IP and transport headers
	u32 csum;            // offset of the transport checksum
	u16 udp_csum;        // an IPv4 UDP checksum as found: 0 means none
	u16 pad2;
};

// parse_ip reads an IPv4 or IPv6 packet's addresses; ports only for TCP and
// UDP (0 otherwise, and for fragments after the first). It returns 0 for
// anything else.
static always_inline int parse_ip(struct __sk_buff *skb, u16 proto, struct pkt *p)
{
	p->l3 = ETH_LEN;
	if (proto == ETH_IP) {
		u8 h[20];
		if (bpf_skb_load_bytes(skb, ETH_LEN, h, 20) < 0)
			return 0;
		u32 ihl = (h[0] & 0xf) * 4;
		if ((h[0] >> 4) != 4 || ihl < 20)
			return 0;
		p->family = 4;
		p->proto = h[9];
		__builtin_memcpy(p->src, h + 12, 4);
		__builtin_memcpy(p->dst, h + 16, 4);
		p->l4 = ETH_LEN + ihl;
		if (((h[6] & 0x1f) | h[7]) != 0) // a fragment after the first: no ports
			p->proto = 0;
	} else if (proto == ETH_IP6) {
		u8 h[IP6_LEN];
		if (bpf_skb_load_bytes(skb, ETH_LEN, h, IP6_LEN) < 0)
			return 0;
		if ((h[0] >> 4) != 6)
			return 0;
		p->family = 6;
		p->proto = h[6]; // extension headers are not followed: not translated
		__builtin_memcpy(p->src, h + 8, 16);
		__builtin_memcpy(p->dst, h + 24, 16);
		p->l4 = ETH_LEN + IP6_LEN;
	} else {
		return 0;
	}
	if (p->proto == PROTO_TCP) {
		u8 t[14];
		if (bpf_skb_load_bytes(skb, p->l4, t, 14) < 0)
			return 0;
		p->sport = get16(t);
		p->dport = get16(t + 2);
		p->syn = (t[13] & 0x12) == 0x02; // SYN without ACK: a new connection
		p->fin = (t[13] & 0x05) != 0;
		p->rst = (t[13] & 0x04) != 0;
		p->csum = p->l4 + 16;
	} else if (p->proto == PROTO_UDP) {
		u8 u[8];
		if (bpf_skb_load_bytes(skb, p->l4, u, 8) < 0)
			return 0;
		p->sport = get16(u);
		p->dport = get16(u + 2);
		p->csum = p->l4 + 6;
		p->udp_csum = get16(u + 6);
	}
	return 1;
}

// rewrite_addr replaces the address at off (the destination, or with from
// the source) and fixes the checksums it is in.
static always_inline int rewrite_addr(struct __sk_buff *skb, struct pkt *p, u32 off, const u8 *from, const u8 *to)
{
	if (p->family == 4) {
		u32 old, new;
		__builtin_memcpy(&old, from, 4);
		__builtin_memcpy(&new, to, 4);
		if (bpf_l3_csum_replace(skb, p->l3 + 10, old, new, 4) < 0)
			return -1;
		if (p->proto == PROTO_TCP || p->udp_csum != 0) {
			u64 flags = BPF_F_PSEUDO_HDR | 4;
			if (p->proto == PROTO_UDP)
				flags |= BPF_F_MARK_MANGLED_0;
			if (bpf_l4_csum_replace(skb, p->csum, old, new, flags) < 0)
				return -1;
		}
		return bpf_skb_store_bytes(skb, off, to, 4, 0);
	}
	u8 a[16], b[16];
	copy16(a, from);
	copy16(b, to);
	s64 diff = bpf_csum_diff((void *)a, 16, (void *)b, 16, 0);
	if (diff < 0 || bpf_l4_csum_replace(skb, p->csum, 0, diff, BPF_F_PSEUDO_HDR) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, off, to, 16, 0);
}

static always_inline int rewrite_port(struct __sk_buff *skb, struct pkt *p, u32 off, u16 from, u16 to)
{
	if (from == to)
		return 0;
	if (p->proto == PROTO_TCP || p->family == 6 || p->udp_csum != 0) {
		u64 flags = 2;
		if (p->proto == PROTO_UDP)
			flags |= BPF_F_MARK_MANGLED_0;
		if (bpf_l4_csum_replace(skb, p->csum, from, to, flags) < 0)
			return -1;
	}
	return bpf_skb_store_bytes(skb, off, &to, 2, 0);
}

// is_vip reports whether addr is a VIP of the family, and its MAC.
static always_inline struct vip *vip_of(const u8 *addr, u8 family)
{
	struct vip_key k = {};
	copy16(k.addr, addr);
	k.family = family;
	return bpf_map_lookup_elem(&vips, &k);
}

// answer_arp turns an ARP request for a VIP into the reply and sends it
// back out of the port it came in by.
static always_inline int answer_arp(struct __sk_buff *skb)
{
	u8 f[42];
	if (bpf_skb_load_bytes(skb, 0, f, 42) < 0)
		return TC_ACT_UNSPEC;
	// Ethernet, IPv4 over Ethernet, request.
	if (get16(f + 14) != bswap16(1) || get16(f + 16) != bswap16(ETH_IP) || f[18] != 6 || f[19] != 4 ||
	    get16(f + 20) != bswap16(1))
		return TC_ACT_UNSPEC;
	u8 target[16] = {};
	__builtin_memcpy(target, f + 38, 4);
	struct vip *v = vip_of(target, 4);
	if (!v)
		return TC_ACT_UNSPEC;
	u8 r[42];
	copy6(r, f + 22);     // to the asker
	copy6(r + 6, v->mac); // from the VIP
	__builtin_memcpy(r + 12, f + 12, 8);
	put16(r + 20, bswap16(2)); // a reply
	copy6(r + 22, v->mac);
	__builtin_memcpy(r + 28, f + 38, 4); // sender: the VIP
	copy6(r + 32, f + 22);                // target: the asker
	__builtin_memcpy(r + 38, f + 28, 4);
	if (bpf_skb_store_bytes(skb, 0, r, 42, 0) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(skb->ifindex, 0);
}

// The neighbour advertisement lb_from_vm answers a solicitation for a VIP
// with: Ethernet, IPv6, ICMPv6 with the target link-layer address option.
struct nd_reply {
	u8 eth[ETH_LEN];
	u8 ip6[IP6_LEN];
	u8 icmp[32];
};

static always_inline u16 fold(s64 sum)
{
	u64 s = (u64)sum;
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (u16)~s;
}

// answer_nd turns a neighbour solicitation for a VIP into the
// advertisement and sends it back out of the port it came in by. A
// solicitation from the unspecified address (duplicate address detection)
// is left alone: no VM claims a VIP.
static always_inline int answer_nd(struct __sk_buff *skb, struct pkt *p)
{
	u8 ns[24];
	if (bpf_skb_load_bytes(skb, p->l4, ns, 24) < 0 || ns[0] != 135 || ns[1] != 0)
		return TC_ACT_UNSPEC;
	struct vip *v = vip_of(ns + 8, 6);
	if (!v)
		return TC_ACT_UNSPEC;
	u8 zero[16] = {};
	if (same_addr(p->src, zero))
		return TC_ACT_UNSPEC;
	u8 eth[ETH_LEN];
	if (bpf_skb_load_bytes(skb, 0, eth, ETH_LEN) < 0)
		return TC_ACT_UNSPEC;
	struct nd_reply r = {};
	copy6(r.eth, eth + 6);
	copy6(r.eth + 6, v->mac);
	put16(r.eth + 12, bswap16(ETH_IP6));
	r.ip6[0] = 0x60;
	put16(r.ip6 + 4, bswap16(32));
	r.ip6[6] = PROTO_ICMP6;
	r.ip6[7] = 255;
	copy16(r.ip6 + 8, ns + 8); // from the VIP
	copy16(r.ip6 + 24, p->src);
	r.icmp[0] = 136;
	r.icmp[4] = 0x60; // solicited, override
	copy16(r.icmp + 8, ns + 8);
	r.icmp[24] = 2; // target link-layer address
	r.icmp[25] = 1;
	copy6(r.icmp + 26, v->mac);
	// The checksum covers the pseudo-header: addresses, length, next header.
	u8 tail[8] = {0, 0, 0, 32, 0, 0, 0, PROTO_ICMP6};
	s64 sum = bpf_csum_diff(0, 0, (void *)(r.ip6 + 8), 32, 0);
	sum = bpf_csum_diff(0, 0, (void *)tail, 8, (u32)sum);
	sum = bpf_csum_diff(0, 0, (void *)r.icmp, 32, (u32)sum);
	put16(r.icmp + 2, fold(sum));
	if (bpf_skb_change_tail(skb, sizeof(r), 0) < 0)
		return TC_ACT_SHOT;
	if (bpf_skb_store_bytes(skb, 0, &r, sizeof(r), 0) < 0)
		return TC_ACT_SHOT;
	return bpf_redirect(skb->ifindex, 0);
}

static always_inline void count(struct backend *b, const u8 *vip, u16 port, u8 proto)
{
	struct conn_key k = {};
	copy16(k.addr, b->addr);
	copy16(k.vip, vip);
	k.port = port;
	k.proto = proto;
	k.family = b->family;
	u64 *n = bpf_map_lookup_elem(&conns, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	u64 one = 1;
	bpf_map_update_elem(&conns, &k, &one, BPF_NOEXIST);
}

// choose returns the index of the backend for a new connection of the
// client to the service, or NONE when no backend is up. A backend that is
// the client itself is passed over: its own packets could not come back
// to it through the bridge.
static always_inline u32 choose(struct svc *s, struct pkt *p, u64 now)
{
	struct aff_key ak = {};
	if (s->source) {
		copy16(ak.client, p->src);
		ak.group = s->group;
		struct aff_val *a = bpf_map_lookup_elem(&aff, &ak);
		if (a && now - a->seen < s->affinity_ns) {
			u32 idx = a->backend;
			struct backend *b = bpf_map_lookup_elem(&backends, &idx);
			if (b && b->up && same_addr(b->addr, a->addr)) {
				a->seen = now;
				return idx;
			}
		}
	}
	u32 h = hash_addr(0x5bd1e995, p->src);
	if (!s->source) {
		h = hash_addr(h, p->dst);
		h = mix(h, ((u32)p->sport << 16) | p->dport);
		h = mix(h, p->proto);
	}
	h = fmix(h);
	if (s->nslots == 0)
		return NONE;
	u32 idx = NONE;
	for (int i = 0; i < RETRIES; i++) {
		u32 slot = s->first_slot + (h + i) % s->nslots;
		u32 *b = bpf_map_lookup_elem(&slots, &slot);
		if (!b || *b == NONE)
			return NONE;
		u32 cand = *b;
		struct backend *be = bpf_map_lookup_elem(&backends, &cand);
		if (!be)
			return NONE;
		idx = cand;
		if (!same_addr(be->addr, p->src))
			break;
	}
	if (s->source && idx != NONE) {
		struct backend *be = bpf_map_lookup_elem(&backends, &idx);
		if (be) {
			struct aff_val av = {};
			copy16(av.addr, be->addr);
			av.backend = idx;
			av.seen = now;
			bpf_map_update_elem(&aff, &ak, &av, BPF_ANY);
		}
	}
	return idx;
}

static always_inline int translate(struct __sk_buff *skb, struct pkt *p, struct svc *s)
{
	u64 now = bpf_ktime_get_ns();
	struct ct_key ck = {};
	copy16(ck.client, p->src);
	copy16(ck.vip, p->dst);
	ck.cport = p->sport;
	ck.vport = p->dport;
	ck.proto = p->proto;
	ck.family = p->family;
	struct ct_val *c = bpf_map_lookup_elem(&ct, &ck);
	struct ct_val cv = {};
	int fresh = 1;
	if (c && !p->syn) {
		fresh = 0;
		if (p->proto == PROTO_UDP) {
			// A datagram follows its backend's health: nothing holds it there.
			u32 idx = c->backend;
			struct backend *b = bpf_map_lookup_elem(&backends, &idx);
			if (b && same_addr(b->addr, c->addr) && !b->up)
				fresh = 1;
		}
	}
	if (!fresh) {
		c->seen = now;
		if (p->fin)
			c->closed = 1;
		cv = *c;
	} else {
		u32 idx = choose(s, p, now);
		if (idx == NONE)
			return TC_ACT_SHOT;
		struct backend *b = bpf_map_lookup_elem(&backends, &idx);
		if (!b)
			return TC_ACT_SHOT;
		copy16(cv.addr, b->addr);
		copy6(cv.mac, b->mac);
		cv.port = s->backend_port;
		cv.backend = idx;
		cv.seen = now;
		bpf_map_update_elem(&ct, &ck, &cv, BPF_ANY);
		struct vip *v = vip_of(p->dst, p->family);
		struct rev_key rk = {};
		copy16(rk.backend, b->addr);
		copy16(rk.client, p->src);
		rk.bport = s->backend_port;
		rk.cport = p->sport;
		rk.proto = p->proto;
		rk.family = p->family;
		struct rev_val rv = {};
		copy16(rv.vip, p->dst);
		rv.vport = p->dport;
		if (v)
			copy6(rv.mac, v->mac);
		bpf_map_update_elem(&rev, &rk, &rv, BPF_ANY);
		count(b, p->dst, s->backend_port, p->proto);
	}
	u32 daddr = p->l3 + (p->family == 4 ? 16 : 24);
	if (rewrite_addr(skb, p, daddr, p->dst, cv.addr) < 0)
		return TC_ACT_SHOT;
	if (rewrite_port(skb, p, p->l4 + 2, p->dport, cv.port) < 0)
		return TC_ACT_SHOT;
	if (bpf_skb_store_bytes(skb, 0, cv.mac, 6, 0) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_UNSPEC;
}

SEC("tc")
int lb_from_vm(struct __sk_buff *skb)
{
	u16 proto = bswap16(skb->protocol);
	if (proto == ETH_ARP)
		return answer_arp(skb);
	struct pkt p = {};
	if (!parse_ip(skb, proto, &p))
		return TC_ACT_UNSPEC;
	if (p.family == 6 && p.proto == PROTO_ICMP6) {
		int r = answer_nd(skb, &p);
		if (r != TC_ACT_UNSPEC)
			return r;
	}
	if (p.proto == PROTO_TCP || p.proto == PROTO_UDP) {
		struct svc_key k = {};
		copy16(k.addr, p.dst);
		k.port = p.dport;
		k.proto = p.proto;
		k.family = p.family;
		struct svc *s = bpf_map_lookup_elem(&services, &k);
		if (s)
			return translate(skb, &p, s);
		if (p.syn) {
			// A connection straight to an address: should it reuse the
			// ports of one made through a VIP before (a client that makes
			// many connections soon reuses its ports), its replies are no
			// longer the VIP's.
			struct rev_key rk = {};
			copy16(rk.backend, p.dst);
			copy16(rk.client, p.src);
			rk.bport = p.dport;
			rk.cport = p.sport;
			rk.proto = p.proto;
			rk.family = p.family;
			bpf_map_delete_elem(&rev, &rk);
		}
	}
	// A VIP answers its listeners only.
	if (vip_of(p.dst, p.family))
		return TC_ACT_SHOT;
	return TC_ACT_UNSPEC;
}

SEC("tc")
int lb_to_vm(struct __sk_buff *skb)
{
	struct pkt p = {};
	if (!parse_ip(skb, bswap16(skb->protocol), &p) || (p.proto != PROTO_TCP && p.proto != PROTO_UDP))
		return TC_ACT_UNSPEC;
	struct rev_key rk = {};
	copy16(rk.backend, p.src);
	copy16(rk.client, p.dst);
	rk.bport = p.sport;
	rk.cport = p.dport;
	rk.proto = p.proto;
	rk.family = p.family;
	struct rev_val *r = bpf_map_lookup_elem(&rev, &rk);
	if (!r)
		return TC_ACT_UNSPEC;
	struct rev_val rv = *r;
	// The reply is the VIP's only while the connection it answers is the
	// one translated: its entry there, to this backend, and for UDP not
	// quiet for long. Otherwise the entry is stale (the client's port has
	// since gone elsewhere), and goes.
	struct ct_key ck = {};
	copy16(ck.client, p.dst);
	copy16(ck.vip, rv.vip);
	ck.cport = p.dport;
	ck.vport = rv.vport;
	ck.proto = p.proto;
	ck.family = p.family;
	struct ct_val *c = bpf_map_lookup_elem(&ct, &ck);
	if (!c || !same_addr(c->addr, p.src) || c->port != p.sport ||
	    (p.proto == PROTO_UDP && bpf_ktime_get_ns() - c->seen > UDP_IDLE_NS)) {
		bpf_map_delete_elem(&rev, &rk);
		return TC_ACT_UNSPEC;
	}
	// The backend reset the connection: it is over, whatever the client
	// says next.
	if (p.rst)
		c->closed = 1;
	u32 saddr = p.l3 + (p.family == 4 ? 12 : 8);
	if (rewrite_addr(skb, &p, saddr, p.src, rv.vip) < 0)
		return TC_ACT_SHOT;
	if (rewrite_port(skb, &p, p.l4, p.sport, rv.vport) < 0)
		return TC_ACT_SHOT;
	if (bpf_skb_store_bytes(skb, 6, rv.mac, 6, 0) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_UNSPEC;
}

char _license[] SEC("license") = "GPL";
