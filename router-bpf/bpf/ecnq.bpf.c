// SPDX-License-Identifier: MIT OR Apache-2.0
//
// ecnq's router in the kernel's data path: a tc egress program, on the
// tcx hook where the kernel has it, else a clsact filter (src/tc.rs).
// It parses IPv4 / IPv6 with UDP or TCP, reads the DSCP scheme tag
// (docs/design.md §2 "DSCP scheme tag"), counts every packet per flow and
// per class, and writes erc's digit into the ECN field of erc packets from
// the index the userspace control loop leaves in `ecnq_ctl` (its start
// code into a new flow's flight), and the other
// schemes' marks from the values the loop derives from its load factors
// (src/control.rs, `Codes`). erc's per-packet rule is the one in
// src/writer.rs; the others are their routers' (`Marker::mark`); the tests
// hold the program to both packet by packet (tests/marks.rs). Every packet passes (TC_ACT_OK): the program
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
// VCP's DSCP pool tag (transport/src/schemes/vcp.rs, WIRE); EVCP's too.
#define VCP_TAG 1
// MPCP's tags, chains of two and three (transport/src/schemes/mpcp.rs,
// `Chain::wire`).
#define DPCP_TAG 2
#define TPCP_TAG 3
// BMCC's tag (transport/src/schemes/bmcc.rs, WIRE).
#define BMCC_TAG 4
// MCP's first tag; tags MCP_TAG..15 carry its flag bits
// (transport/src/schemes/mcp.rs, WIRE): fairing, this-path, probe.
#define MCP_TAG 8
#define MCP_FAIRING 0x1
#define MCP_THIS_PATH 0x2
#define MCP_PROBE 0x4
// A fairing request lasts until two periods past the one it came in
// (transport/src/schemes/mcp.rs, FAIRING_PERIODS).
#define FAIRING_PERIODS 2
// erc's start code (transport/src/schemes/erc/start.rs,
// START_CODE_DIGITS; router/mod.rs, DATA_PACKET, RETURN_GAP,
// LONGEST_ROUND): a new flow's first data-sized datagrams (IP bytes)
// before its first silence, up to this many, carry it.
#define START_CODE_DIGITS 3
#define DATA_PACKET 256
#define RETURN_GAP_NS 10000000ull
#define LONGEST_ROUND_NS 3000000000ull
// The start codes the loop leaves ahead: for the next new flights, one
// after the other (src/maps.rs, `StartCodes`).
#define START_CODES 8

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
#define ECN_ECT1 0x1
#define ECN_ECT0 0x2
#define ECN_CE 0x3

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
	// interval: an ECT packet of VCP's is raised to it (VcpMarker).
	__u8 vcp_code;
	// The code MCP's router writes (McpMarker): a packet's code is
	// raised to it.
	__u8 mcp_code;
	// Whether BMCC's load is past u: every ECT packet of BMCC's is CE.
	__u8 bmcc_ce;
	__u8 pad0;
	// The meter's last completed interval, which times MCP's fairing
	// requests (LinkLoad's epoch).
	__u64 epoch;
	// How many of the 65 536 values of a hash's high 16 bits have an ADPM
	// threshold under BMCC's load: a packet whose high bits are under
	// this is marked ECT(1) (BmccMarker).
	__u32 bmcc_below;
	// The digit MPCP's router writes at each chain position, for chains
	// of two and of three (MpcpMarker).
	__u8 mpcp_digits[2][3];
	__u8 pad1[6];
	// The start codes erc's router would write into the next new flows'
	// flights, one after the other (ErcMarker::next_start_codes), from
	// the `flights_base`th flight on (the count in `ecnq_flights`).
	__u8 start_codes[START_CODES];
	__u64 flights_base;
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
	// MPCP: how this router's level compares with the packet's over the
	// digits of the chain so far, after each of its first two positions
	// (MpcpMarker's `Prefix`).
	__u8 mpcp_prefix[2];
	__u8 pad;
	// erc's flight (ErcMarker's FlowState): when the flow's first and
	// last packets came (the coarse clock), its flight datagrams seen,
	// whether its first silence of RETURN_GAP came, and the code its
	// flight carries.
	__u64 first_ns;
	__u64 last_ns;
	__u8 flight;
	__u8 round_seen;
	__u8 start_code;
	__u8 pad2[5];
};

// Per-class counters (src/maps.rs, `ClassCounters`).
struct class_counters {
	__u64 bytes;
	__u64 packets;
	// Packets whose TOS byte the program rewrote.
	__u64 marked;
	// Packets of the schemes it marks left unmarked because the control
	// loop's state was stale.
	__u64 stale;
	// GSO packets counted but not marked: their segments' hashes differ.
	__u64 gso;
};

// The end of MCP's fairing request, a period of the meter's (McpMarker's
// `fairing_until`): set by the packets that ask for fairing, apart from
// the control map, which the loop writes whole.
struct mcp_state {
	__u64 fairing_until;
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

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mcp_state);
} ecnq_mcp SEC(".maps");

// New erc flights seen, for the control loop, which leaves the codes of
// the next ones from this count on.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} ecnq_flights SEC(".maps");

// Whether the control loop's index is current (now < `expires_ns`). The
// coarse clock, a read of the last tick's time, answers for most of a
// lease; the last `coarse_lag_ns` of it, where the coarse clock cannot
// tell, and wherever the lag is unknown, read the exact clock
// (tests/marks.rs, marks_stop_when_the_control_loop_dies_and_nothing_is_lost).
static __always_inline int lease_live(struct control *ctl, __u64 coarse_now)
{
	__u64 expires = ctl->expires_ns;
	__u32 lag = ctl->coarse_lag_ns;

	if (lag && coarse_now + lag < expires)
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

// Rewrites the TOS byte (DSCP and ECN) to `tos` in place: for IPv4 with an
// incremental update of the header checksum (RFC 1624, eqn. 3: HC' = ~(~HC
// + ~m + m')), over the header's first 16-bit word, which holds the TOS byte.
static __always_inline int write_tos(struct __sk_buff *skb, __u32 l3, struct parsed *p, __u8 tos)
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
		iph->tos = tos;
		new_word = *(__u16 *)iph;
		sum = (__u16)~iph->check + (__u16)~old_word + new_word;
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		iph->check = ~sum;
	} else {
		// The traffic class straddles the first two bytes, after the
		// version and before the flow label (RFC 8200 §3).
		if ((void *)(ip + 2) > data_end)
			return -1;
		ip[0] = (ip[0] & 0xf0) | (tos >> 4);
		ip[1] = (ip[1] & 0x0f) | (tos << 4);
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

// erc's flight (ErcMarker::mark, meter_packet): a new flow's data-sized
// datagrams before its first silence of RETURN_GAP, up to
// START_CODE_DIGITS, carry the start code in place of the chain's digits.
// A flow silent for longer than LONGEST_ROUND comes back as a new one, as
// erc's router has forgotten it by then: a new flight, its incoming chain
// unknown (Writer::flight; tests/marks.rs replays a round after such a
// silence). Returns the datagram's place in the flight, or -1 past it.
// The first takes the code the loop left for the flight's turn; a stale
// loop's is none. `now` is the coarse clock, which the lease check reads
// too.
static __always_inline int erc_flight(struct control *ctl, struct flow_value *flow, int created,
				      __u32 len, int live, __u64 now)
{
	__u64 *count, turn;
	__u32 zero = 0;
	int nth;

	if (created || now - flow->last_ns > LONGEST_ROUND_NS) {
		flow->first_ns = now;
		flow->last_ns = now;
		flow->round_seen = 0;
		flow->flight = 0;
		flow->start_code = 0;
		flow->in_code = 0;
		flow->in_seen = 0;
	} else if (flow->round_seen || flow->flight >= START_CODE_DIGITS) {
		flow->last_ns = now;
		return -1;
	}
	if (!flow->round_seen && now - flow->last_ns >= RETURN_GAP_NS &&
	    now - flow->first_ns <= LONGEST_ROUND_NS)
		flow->round_seen = 1;
	flow->last_ns = now;
	if (flow->round_seen || len < DATA_PACKET || flow->flight >= START_CODE_DIGITS)
		return -1;
	nth = flow->flight++;
	if (nth == 0) {
		count = bpf_map_lookup_elem(&ecnq_flights, &zero);
		turn = count ? __sync_fetch_and_add(count, 1) - ctl->flights_base : 0;
		// A turn past the table's (or before its base) takes its last.
		if (turn >= START_CODES)
			turn = START_CODES - 1;
		flow->start_code = live ? ctl->start_codes[turn & (START_CODES - 1)] : 0;
	}
	return nth;
}

// MPCP's prefix comparison (MpcpMarker's `Prefix`): equal so far, this
// router more congested (it writes its digits), upstream more congested.
#define PREFIX_EQUAL 0
#define PREFIX_ROUTER 1
#define PREFIX_UPSTREAM 2

// MPCP's per-packet decision (MpcpMarker::mark) for an ECT packet at its
// chain position, `n` digits a chain: compare this router's digit with the
// carried one while the chain's digits so far are equal, write its own
// where this router's level is the higher. Returns the new ECN.
static __always_inline __u8 mpcp_mark(struct flow_value *flow, const __u8 *digits, __u32 n,
				      __u32 hash, __u8 ecn)
{
	__u32 position = hash % n;
	__u8 own, carried = ecn - 1, before, after;

	// Constant indices: the verifier does not bound a remainder.
	if (position == 0) {
		own = digits[0];
		before = PREFIX_EQUAL;
	} else if (position == 1) {
		own = digits[1];
		before = flow->mpcp_prefix[0];
	} else {
		own = digits[2];
		before = flow->mpcp_prefix[1];
	}
	after = before;
	if (before == PREFIX_EQUAL && own > carried)
		after = PREFIX_ROUTER;
	else if (before == PREFIX_EQUAL && own < carried)
		after = PREFIX_UPSTREAM;
	if (position == 0 && n > 1)
		flow->mpcp_prefix[0] = after;
	else if (position == 1 && n > 2)
		flow->mpcp_prefix[1] = after;
	return after == PREFIX_ROUTER ? own + 1 : ecn;
}

// BMCC's per-packet decision (BmccMarker::mark, ADPM) for an ECT packet:
// CE past u, ECT(1) where the load is over the packet's threshold θ(h).
static __always_inline __u8 bmcc_mark(struct control *ctl, __u32 hash, __u8 ecn)
{
	if (ecn == ECN_CE)
		return ecn;
	if (ctl->bmcc_ce)
		return ECN_CE;
	return (hash >> 16) < ctl->bmcc_below ? ECN_ECT1 : ecn;
}

// MCP's per-packet decision (McpMarker::mark): raise the code, start or
// prolong a fairing request, set the fairing bit while one lasts. Returns
// the new TOS byte.
static __always_inline __u8 mcp_mark(struct control *ctl, __u8 tag, __u8 ecn)
{
	__u32 zero = 0;
	struct mcp_state *state = bpf_map_lookup_elem(&ecnq_mcp, &zero);
	__u8 code = ecn > ctl->mcp_code ? ecn : ctl->mcp_code;
	__u8 flags = tag & ~MCP_PROBE & 0x7;
	__u64 until = ctl->epoch + FAIRING_PERIODS;

	if (state) {
		if ((flags & MCP_FAIRING) && (flags & MCP_THIS_PATH) && state->fairing_until < until)
			state->fairing_until = until;
		// Codes `01` and `10`, 48 to 98 % (McpCode::admits_fairing).
		if (ctl->epoch < state->fairing_until && (code == ECN_ECT1 || code == ECN_ECT0))
			flags |= MCP_FAIRING;
	}
	return (((MCP_TAG | flags) << 2) | POOL) << 2 | code;
}

// Whether the program marks a tag's packets from the loop's values: VCP's
// (and EVCP's), MPCP's, BMCC's and MCP's. Prague's marks come from the
// sojourn time, which a packet has not had before it is queued.
static __always_inline int marked_by_load(__u8 tag)
{
	return tag == VCP_TAG || tag == DPCP_TAG || tag == TPCP_TAG || tag == BMCC_TAG ||
	       tag >= MCP_TAG;
}

// The schemes other than erc, whose routers write a value per interval
// into each packet: raise a presence probe as the registry says
// (`WireScheme::raise_probe`), then mark as the scheme's router does.
// Returns the new TOS byte.
static __always_inline int mark_by_load(struct __sk_buff *skb, struct control *ctl,
					struct parsed *p, struct flow_value *flow,
					struct class_counters *class, __u32 segs)
{
	__u8 tag = p->tag, ecn = p->tos & ECN_MASK, dscp_bits = p->tos & ~ECN_MASK;
	__u32 hash = 0, off = p->l4_off, len = p->l4_len;
	int hashed = tag == DPCP_TAG || tag == TPCP_TAG || tag == BMCC_TAG;

	if (tag >= MCP_TAG)
		return mcp_mark(ctl, tag, ecn);
	// A Not-ECT packet of these schemes is a presence probe: raised to
	// the base codepoint.
	if (ecn == ECN_NOT_ECT)
		ecn = tag == BMCC_TAG ? ECN_ECT0 : ECN_ECT1;
	if (tag == VCP_TAG)
		return dscp_bits | (ecn > ctl->vcp_code ? ecn : ctl->vcp_code);
	if (!hashed)
		return p->tos;
	// The hash of a UDP packet's payload, of a TCP packet's segment
	// (the shim's classification); a GSO batch's segments differ.
	if (segs > 1) {
		if (class)
			class->gso++;
		return p->tos;
	}
	if (p->key.proto == IPPROTO_UDP) {
		if (len < 8)
			return p->tos;
		off += 8;
		len -= 8;
	}
	if (p->l4_len > skb->len - p->l4_off || packet_hash(skb, off, len, &hash))
		return p->tos;
	if (tag == BMCC_TAG)
		return dscp_bits | bmcc_mark(ctl, hash, ecn);
	if (tag == DPCP_TAG)
		return dscp_bits | mpcp_mark(flow, ctl->mpcp_digits[0], 2, hash, ecn);
	return dscp_bits | mpcp_mark(flow, ctl->mpcp_digits[1], 3, hash, ecn);
}

SEC("tc")
int ecnq_egress(struct __sk_buff *skb)
{
	struct parsed p = {};
	struct flow_value *flow, fresh = {};
	struct class_counters *class;
	struct control *ctl;
	__u32 zero = 0, tag, hash, segs, l3, bytes;
	__u64 now;
	__u8 ecn;
	int out, created = 0, live, nth;

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
		if (bpf_map_update_elem(&ecnq_flows, &p.key, &fresh, BPF_NOEXIST) == 0) {
			bpf_map_push_elem(&ecnq_new_flows, &p.key, 0);
			created = 1;
		}
		flow = bpf_map_lookup_elem(&ecnq_flows, &p.key);
		if (!flow)
			return TC_ACT_OK;
	}
	__sync_fetch_and_add(&flow->bytes, bytes);
	__sync_fetch_and_add(&flow->packets, segs);
	flow->tag = p.tag;

	if (tag != ERC_TAG) {
		if (!marked_by_load(tag))
			return TC_ACT_OK;
		if (!lease_live(ctl, bpf_ktime_get_coarse_ns())) {
			if (class)
				class->stale++;
			return TC_ACT_OK;
		}
		out = mark_by_load(skb, ctl, &p, flow, class, segs);
		if (out != p.tos && write_tos(skb, l3, &p, out) == 0 && class)
			class->marked++;
		return TC_ACT_OK;
	}
	ecn = p.tos & ECN_MASK;
	if (p.key.proto != IPPROTO_UDP)
		return TC_ACT_OK;
	now = bpf_ktime_get_coarse_ns();
	live = ctl->index != 0 && lease_live(ctl, now);
	// A GSO batch is a local sender's, never a handshake flight.
	nth = segs > 1 ? -1 : erc_flight(ctl, flow, created, bytes, live, now);
	if (nth >= 0) {
		// A datagram an upstream router cleared stays cleared; CE and
		// ECT(1) pass.
		if (ecn == ECN_ECT0 && nth < flow->start_code &&
		    write_tos(skb, l3, &p, p.tos & ~ECN_MASK) == 0 && class)
			class->marked++;
		return TC_ACT_OK;
	}
	if (ecn != ECN_NOT_ECT && ecn != ECN_ECT0)
		return TC_ACT_OK;
	if (!live) {
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
	if (write_tos(skb, l3, &p, (p.tos & ~ECN_MASK) | out) == 0 && class)
		class->marked++;
	return TC_ACT_OK;
}
