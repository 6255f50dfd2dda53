// SPDX-License-Identifier: MIT OR Apache-2.0
//
// ecnq's router in the kernel's data path: a tc (clsact) egress program.
// It parses IPv4 / IPv6 with UDP or TCP, reads the DSCP scheme tag
// (docs/design.md §2 "DSCP scheme tag"), counts every packet per flow and
// per class, and writes erc's digit into the ECN field of erc packets from
// the index the userspace control loop leaves in `ecnq_ctl`. The per-packet
// rule is the one in src/writer.rs, which the tests hold it to packet by
// packet (tests/marks.rs). Every packet passes (TC_ACT_OK): the program
// never drops, so detaching it, or its control loop dying, leaves plain
// forwarding.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// erc's wire (transport/src/schemes/erc/index.rs): 10 Gray-coded digits,
// position = hash % 10, digit 0 Not-ECT, digit 1 ECT(0).
#define DIGITS 10
#define ALL_DIGITS ((1 << DIGITS) - 1)
// The index whose Gray code is all ones: "no erc router" (UNSPOKEN).
#define UNSPOKEN 682
// erc's DSCP pool tag (transport/src/schemes/erc/mod.rs, WIRE).
#define ERC_TAG 6
// VCP's DSCP pool tag (transport/src/schemes/vcp.rs, WIRE).
#define VCP_TAG 1
// The experimental pool xxxx11 (RFC 2474 §6; docs/design.md §2).
#define POOL 3
// The packet hash reads the last 16 bytes of the UDP payload
// (docs/design.md §2 "Packet hash"; transport/src/wire/hash.rs).
#define HASHED_TAIL 16
#define FNV_OFFSET 0x811c9dc5u
#define FNV_PRIME 0x01000193u
// The furthest offset at which the program reads the hashed tail in
// place: a linear part longer than any MTU's packet (0x3fff, 16 KiB).
#define LINEAR_MAX 0x3fff
// Per-flow entries: an LRU table forgets the least recently seen flows
// (as many as the shim's router keeps, FlowTableConfig's default).
#define MAX_FLOWS 65536
// Flows that join between two of the control loop's reads, at most.
#define NEW_FLOWS 4096
// Per-class counters, one per DSCP pool tag (0: untagged).
#define CLASSES 16

#define ECN_MASK 0x3
#define ECN_NOT_ECT 0x0
#define ECN_ECT0 0x2

// What the control loop writes every period (src/maps.rs, `Control`).
struct control {
	// bpf_ktime_get_ns() past which the index is stale: no marks.
	__u64 expires_ns;
	// The index erc writes; 0: none.
	__u16 index;
	// Where the IP header starts: the device's link header length.
	__u8 l3;
	// Set once the control loop configured the program; until then, and
	// after it withdrew, every packet passes uncounted.
	__u8 ready;
	// How far CLOCK_MONOTONIC_COARSE may trail CLOCK_MONOTONIC: twice
	// its resolution, the tick (clock_getres(2)); 0: unknown.
	__u32 coarse_lag_ns;
	// The class (an htb leaf's classid) that ecnq-tagged packets queue
	// in, through skb->priority, apart from classic traffic; 0: leave
	// the packet's priority as it is (one queue for all).
	__u32 ecnq_class;
	// The code VCP's router writes, from the load factor of its last
	// interval: an ECT packet of VCP's is raised to it (VcpMarker);
	// 0: none.
	__u8 vcp_code;
	__u8 pad[3];
};

// A flow: the 5-tuple, IPv4 addresses in the first 4 bytes (src/maps.rs,
// `FlowKey`).
struct flow_key {
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 family;
	__u8 pad[2];
};

// What the program keeps per flow (src/maps.rs, `FlowValue`).
struct flow_value {
	__u64 bytes;
	__u64 packets;
	// The digits an upstream router left, and the positions seen
	// (transport's `Digits`, bit 9 - position).
	__u16 in_code;
	__u16 in_seen;
	// The DSCP pool tag of the flow's last packet (0: untagged).
	__u8 tag;
	__u8 pad[3];
};

// Per-class counters (src/maps.rs, `ClassCounters`).
struct class_counters {
	__u64 bytes;
	__u64 packets;
	// Packets whose ECN the program rewrote.
	__u64 marked;
	// erc and VCP packets left unmarked because the control loop's state
	// was stale.
	__u64 stale;
	// GSO packets counted but not marked: their segments' hashes differ.
	__u64 gso;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct control);
} ecnq_ctl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_FLOWS);
	__type(key, struct flow_key);
	__type(value, struct flow_value);
} ecnq_flows SEC(".maps");

// Flows new to the table, for the control loop, which reads the
// counters of the flows it knows one by one instead of walking the
// whole table every period. When it is full, the loop's periodic walk
// finds the flows it missed.
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, NEW_FLOWS);
	__type(value, struct flow_key);
} ecnq_new_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CLASSES);
	__type(key, __u32);
	__type(value, struct class_counters);
} ecnq_class SEC(".maps");

// Whether the control loop's index is current (now < `expires_ns`). The
// coarse clock, a read of the last tick's time, answers for most of a
// lease; the last `coarse_lag_ns` of it, where the coarse clock cannot
// tell, and wherever the lag is unknown, read the exact clock
// (tests/marks.rs, marks_stop_when_the_control_loop_dies_and_nothing_is_lost).
static __always_inline int lease_live(struct control *ctl)
{
	__u64 expires = ctl->expires_ns;
	__u32 lag = ctl->coarse_lag_ns;

	if (lag && bpf_ktime_get_coarse_ns() + lag < expires)
		return 1;
	return bpf_ktime_get_ns() < expires;
}

// The packet as parsed.
struct parsed {
	struct flow_key key;
	__u32 l4_off;
	__u32 l4_len;
	__u8 tos;
	__u8 tag;
	__u8 ipv4;
};

static __always_inline __u32 fmix32(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

// The ecnq packet hash of the UDP payload at `off`, `len` bytes long:
// fmix32(FNV-1a-32(last min(16, len) bytes)). Returns -1 if the bytes
// cannot be read.
static __always_inline long packet_hash(struct __sk_buff *skb, __u32 off, __u32 len, __u32 *out)
{
	__u8 tail[HASHED_TAIL] = {};
	__u32 n = len < HASHED_TAIL ? len : HASHED_TAIL;
	__u32 h = FNV_OFFSET;

	if (n == HASHED_TAIL) {
		// In place where the tail is in the buffer's linear part, as a
		// forwarded packet's is: no copy, the byte loop unrolled.
		void *data = (void *)(long)skb->data;
		void *data_end = (void *)(long)skb->data_end;
		__u32 at = off + len - HASHED_TAIL;
		__u8 *b;

		// The verifier takes a variable offset into the packet under
		// its MAX_PACKET_OFF (64 KiB) only with the bound in the
		// register: the mask, a no-op past the compare, puts it there.
		b = data;
		if (at <= LINEAR_MAX) {
			asm volatile("%0 &= %1" : "+r"(at) : "i"(LINEAR_MAX));
			b += at;
		}
		if (at <= LINEAR_MAX && (void *)(b + HASHED_TAIL) <= data_end) {
#pragma unroll
			for (__u32 i = 0; i < HASHED_TAIL; i++)
				h = (h ^ b[i]) * FNV_PRIME;
			*out = fmix32(h);
			return 0;
		}
		if (bpf_skb_load_bytes(skb, off + len - HASHED_TAIL, tail, HASHED_TAIL))
			return -1;
	} else {
		// Under 16 bytes: one byte at a time, the length bounded.
		for (__u32 i = 0; i < HASHED_TAIL - 1; i++) {
			if (i >= n)
				break;
			if (bpf_skb_load_bytes(skb, off + i, &tail[i], 1))
				return -1;
		}
	}
	for (__u32 i = 0; i < HASHED_TAIL; i++) {
		if (i >= n)
			break;
		h = (h ^ tail[i]) * FNV_PRIME;
	}
	*out = fmix32(h);
	return 0;
}

// The index a Gray code spells (transport's `from_gray`).
static __always_inline __u16 from_gray(__u16 code)
{
	code ^= code >> 1;
	code ^= code >> 2;
	code ^= code >> 4;
	code ^= code >> 8;
	return code;
}

// The DSCP pool tag of a TOS byte, 0 outside the pool (the registry's
// `SchemeTag::from_dscp` keeps MCP's flag bits in the tag's low bits).
static __always_inline __u8 pool_tag(__u8 tos)
{
	__u8 dscp = tos >> 2;

	return (dscp & POOL) == POOL ? (dscp >> 2) & 0xf : 0;
}

// The headers the program reads, at most: IPv4 with options and the
// ports (IPv6 needs 44).
#define HEADERS_MAX (60 + 4)

// parse_linear's answer when the headers run past the buffer's linear part.
#define PARSE_PULL 1

// Reads the headers in place (direct packet access, no helper call per
// field). Returns 0, -1 for a packet the program leaves, or PARSE_PULL
// where the headers it needs are not all in the linear part.
static __always_inline int parse_linear(struct __sk_buff *skb, __u32 l3, struct parsed *p)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	__u8 *ip = data + l3, *l4;
	__u8 proto;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = (void *)ip;

		if ((void *)(iph + 1) > data_end)
			return PARSE_PULL;
		if (iph->ihl < 5)
			return -1;
		// A fragment other than the first carries no ports.
		if (iph->frag_off & bpf_htons(0x1fff))
			return -1;
		__builtin_memcpy(p->key.saddr, &iph->saddr, 4);
		__builtin_memcpy(p->key.daddr, &iph->daddr, 4);
		p->key.family = 4;
		p->tos = iph->tos;
		p->ipv4 = 1;
		proto = iph->protocol;
		l4 = ip + iph->ihl * 4;
		p->l4_len = bpf_ntohs(iph->tot_len) - iph->ihl * 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)ip;

		if ((void *)(ip6 + 1) > data_end)
			return PARSE_PULL;
		__builtin_memcpy(p->key.saddr, &ip6->saddr, 16);
		__builtin_memcpy(p->key.daddr, &ip6->daddr, 16);
		p->key.family = 6;
		p->tos = (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
		p->ipv4 = 0;
		proto = ip6->nexthdr;
		l4 = ip + sizeof(*ip6);
		p->l4_len = bpf_ntohs(ip6->payload_len);
	} else {
		return -1;
	}
	if (proto != IPPROTO_UDP && proto != IPPROTO_TCP)
		return -1;
	if ((void *)(l4 + 4) > data_end)
		return PARSE_PULL;
	p->key.proto = proto;
	__builtin_memcpy(&p->key.sport, l4, 4);
	p->l4_off = l4 - (__u8 *)data;
	p->tag = pool_tag(p->tos);
	return 0;
}

// Reads the headers. A forwarded packet's headers are mostly in the
// linear part of its buffer, but its payload need not be (a GSO batch
// cut into segments keeps each one's payload in page fragments): only a
// packet whose headers are not all there pays for a pull, which can copy
// the buffer's head, and then of at most HEADERS_MAX bytes.
static __always_inline int parse(struct __sk_buff *skb, __u32 l3, struct parsed *p)
{
	__u32 want = l3 + HEADERS_MAX;
	int r = parse_linear(skb, l3, p);

	if (r != PARSE_PULL)
		return r;
	if (skb->len <= l3)
		return -1;
	bpf_skb_pull_data(skb, want < skb->len ? want : skb->len);
	return parse_linear(skb, l3, p) ? -1 : 0;
}

// Rewrites the ECN field to `ecn` in place: for IPv4 with an incremental
// update of the header checksum (RFC 1624, eqn. 3: HC' = ~(~HC + ~m +
// m')), over the header's first 16-bit word, which holds the TOS byte.
static __always_inline int write_ecn(struct __sk_buff *skb, __u32 l3, struct parsed *p, __u8 ecn)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	__u8 *ip = data + l3;

	if (p->ipv4) {
		struct iphdr *iph = (void *)ip;
		__u16 old_word, new_word;
		__u32 sum;

		if ((void *)(iph + 1) > data_end)
			return -1;
		old_word = *(__u16 *)iph;
		iph->tos = (p->tos & ~ECN_MASK) | ecn;
		new_word = *(__u16 *)iph;
		sum = (__u16)~iph->check + (__u16)~old_word + new_word;
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		iph->check = ~sum;
	} else {
		// The traffic class straddles the first two bytes: ECN is bits
		// 4-5 of byte 1 (RFC 8200 §3).
		if ((void *)(ip + 2) > data_end)
			return -1;
		ip[1] = (ip[1] & ~(ECN_MASK << 4)) | (ecn << 4);
	}
	return 0;
}

// erc's per-packet decision (src/writer.rs, `write`): learn the incoming
// digit at the packet's position; write this router's digit unless the
// incoming chain is whole and spells an index at least as large (the path
// minimum of the rate). Returns the new ECN, or -1 to leave the packet.
static __always_inline int erc_digit(struct flow_value *flow, __u16 index, __u32 hash, __u8 ecn)
{
	__u32 position = hash % DIGITS;
	__u16 bit = 1 << (DIGITS - 1 - position);
	__u16 code, spelled;

	if (ecn == ECN_ECT0)
		flow->in_code |= bit;
	else
		flow->in_code &= ~bit;
	flow->in_seen |= bit;
	code = flow->in_code & ALL_DIGITS;
	spelled = from_gray(code);
	if (spelled == UNSPOKEN)
		spelled = 0;
	if ((flow->in_seen & ALL_DIGITS) == ALL_DIGITS && spelled >= index)
		return -1;
	return ((index ^ (index >> 1)) & bit) ? ECN_ECT0 : ECN_NOT_ECT;
}

SEC("tc")
int ecnq_egress(struct __sk_buff *skb)
{
	struct parsed p = {};
	struct flow_value *flow, fresh = {};
	struct class_counters *class;
	struct control *ctl;
	__u32 zero = 0, tag, hash, segs, l3, bytes;
	__u8 ecn;
	int out;

	ctl = bpf_map_lookup_elem(&ecnq_ctl, &zero);
	if (!ctl || !ctl->ready)
		return TC_ACT_OK;
	l3 = ctl->l3;
	if (parse(skb, l3, &p))
		return TC_ACT_OK;
	tag = p.tag;
	if (tag && ctl->ecnq_class)
		skb->priority = ctl->ecnq_class;
	// IP bytes, as the shim's router counts them.
	bytes = skb->len - l3;
	segs = skb->gso_segs > 1 ? skb->gso_segs : 1;
	class = bpf_map_lookup_elem(&ecnq_class, &tag);
	if (class) {
		class->bytes += bytes;
		class->packets += segs;
	}
	flow = bpf_map_lookup_elem(&ecnq_flows, &p.key);
	if (!flow) {
		if (bpf_map_update_elem(&ecnq_flows, &p.key, &fresh, BPF_NOEXIST) == 0)
			bpf_map_push_elem(&ecnq_new_flows, &p.key, 0);
		flow = bpf_map_lookup_elem(&ecnq_flows, &p.key);
		if (!flow)
			return TC_ACT_OK;
	}
	__sync_fetch_and_add(&flow->bytes, bytes);
	__sync_fetch_and_add(&flow->packets, segs);
	flow->tag = p.tag;

	ecn = p.tos & ECN_MASK;
	if (tag == VCP_TAG) {
		// Codes are only raised, and a Not-ECT packet carries none.
		if (ecn == ECN_NOT_ECT || ctl->vcp_code <= ecn)
			return TC_ACT_OK;
		if (!lease_live(ctl)) {
			if (class)
				class->stale++;
			return TC_ACT_OK;
		}
		if (write_ecn(skb, l3, &p, ctl->vcp_code) == 0 && class)
			class->marked++;
		return TC_ACT_OK;
	}
	if (tag != ERC_TAG || p.key.proto != IPPROTO_UDP)
		return TC_ACT_OK;
	if (ecn != ECN_NOT_ECT && ecn != ECN_ECT0)
		return TC_ACT_OK;
	if (ctl->index == 0 || !lease_live(ctl)) {
		if (class)
			class->stale++;
		return TC_ACT_OK;
	}
	if (segs > 1) {
		if (class)
			class->gso++;
		return TC_ACT_OK;
	}
	if (p.l4_len < 8 || p.l4_len > skb->len - p.l4_off)
		return TC_ACT_OK;
	if (packet_hash(skb, p.l4_off + 8, p.l4_len - 8, &hash))
		return TC_ACT_OK;
	out = erc_digit(flow, ctl->index, hash, ecn);
	if (out < 0 || out == ecn)
		return TC_ACT_OK;
	if (write_ecn(skb, l3, &p, out) == 0 && class)
		class->marked++;
	return TC_ACT_OK;
}
