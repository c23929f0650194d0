// SPDX-License-Identifier: GPL-2.0
//
// fwdscope's XDP forwarder (`lab up --mode xdp`): IPv4 forwarding over the kernel's FIB,
// entirely in XDP. For each frame on the input interface:
//
//   parse Ethernet and IPv4 -> TTL check -> bpf_fib_lookup (the namespace's routes and
//   neighbours) -> TTL - 1 with an incremental checksum update (RFC 1624, as the kernel's
//   ip_decrease_ttl) -> MACs from the lookup -> bpf_redirect_map into a devmap of egress
//   interfaces keyed by ifindex.
//
// What it does with each frame, and the counter it adds to (per CPU, `fwd_xdp_stats`):
//   FWD_RX / FWD_RX_BYTES          every frame seen
//   FWD_FORWARDED / _BYTES         redirected (XDP_REDIRECT)
//   FWD_RUNT                       shorter than Ethernet + IPv4 headers: dropped
//   FWD_BAD_VERSION, FWD_BAD_IHL   IPv4 ethertype, version != 4 or ihl < 5: dropped
//   FWD_NOT_IPV4                   ARP, IPv6, ...: passed to the kernel's stack
//   FWD_TTL_EXPIRED                TTL <= 1: passed (the kernel sends the ICMP)
//   FWD_NO_ROUTE                   FIB: no route, blackhole, unreachable, prohibit: dropped
//   FWD_NO_NEIGH                   FIB: next hop without a neighbour entry: passed (the
//                                  kernel resolves it)
//   FWD_FIB_OTHER                  FIB: forwarding disabled, fragmentation needed, tunnel,
//                                  no source address: passed
//   FWD_REDIRECT_FAILED            the egress interface is not in the devmap: dropped
//
// Each frame adds to FWD_RX and to exactly one other packet counter, so rx = forwarded +
// the sum of the reasons. Frames lost after a successful redirect (the egress device's
// queue full) are the device's to count.
//
// `fwd_xdp_pass` is a plain XDP_PASS program: native redirect into a veth needs the peer
// of the egress veth to run an XDP program (it gives the peer the NAPI context that takes
// redirected frames), so the lab attaches it there.
//
// Built by lab/build.rs with clang -target bpf -g (BTF); loaded by lab/src/xdp.rs.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef AF_INET
#define AF_INET 2
#endif

enum fwd_counter {
	FWD_RX,
	FWD_RX_BYTES,
	FWD_FORWARDED,
	FWD_FORWARDED_BYTES,
	FWD_RUNT,
	FWD_BAD_VERSION,
	FWD_BAD_IHL,
	FWD_NOT_IPV4,
	FWD_TTL_EXPIRED,
	FWD_NO_ROUTE,
	FWD_NO_NEIGH,
	FWD_FIB_OTHER,
	FWD_REDIRECT_FAILED,
	FWD_N_COUNTERS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FWD_N_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} fwd_xdp_stats SEC(".maps");

// Egress interfaces: key and value are the ifindex.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} fwd_xdp_ports SEC(".maps");

static __always_inline void count(__u32 which, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&fwd_xdp_stats, &which);

	if (v)
		*v += n;
}

// Count the frame under `which` and return `action`.
static __always_inline int verdict(__u32 which, int action)
{
	count(which, 1);
	return action;
}

SEC("xdp")
int fwd_xdp_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct bpf_fib_lookup fib = {};
	__u64 len = end - data;
	__u32 check;
	long rc;

	count(FWD_RX, 1);
	count(FWD_RX_BYTES, len);
	if ((void *)(eth + 1) > end)
		return verdict(FWD_RUNT, XDP_DROP);
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return verdict(FWD_NOT_IPV4, XDP_PASS);
	if ((void *)(ip + 1) > end)
		return verdict(FWD_RUNT, XDP_DROP);
	if (ip->version != 4)
		return verdict(FWD_BAD_VERSION, XDP_DROP);
	if (ip->ihl < 5)
		return verdict(FWD_BAD_IHL, XDP_DROP);
	if (ip->ttl <= 1)
		return verdict(FWD_TTL_EXPIRED, XDP_PASS);

	fib.family = AF_INET;
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.tot_len = bpf_ntohs(ip->tot_len);
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = ip->daddr;
	fib.ifindex = ctx->ingress_ifindex;
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
		break;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		return verdict(FWD_NO_ROUTE, XDP_DROP);
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		return verdict(FWD_NO_NEIGH, XDP_PASS);
	default:
		return verdict(FWD_FIB_OTHER, XDP_PASS);
	}

	// TTL - 1: the checksum's ones' complement sum grows by 0x0100 (network order),
	// with the end-around carry.
	check = ip->check;
	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xFFFF));
	ip->ttl--;
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);

	if (bpf_redirect_map(&fwd_xdp_ports, fib.ifindex, 0) != XDP_REDIRECT)
		return verdict(FWD_REDIRECT_FAILED, XDP_DROP);
	count(FWD_FORWARDED, 1);
	count(FWD_FORWARDED_BYTES, len);
	return XDP_REDIRECT;
}

SEC("xdp")
int fwd_xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
