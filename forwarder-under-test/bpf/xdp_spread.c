// SPDX-License-Identifier: GPL-2.0
//
// fwdscope's flow-spreading XDP program, for `--driver afxdp` with more workers than the
// input interface has rx queues (a one-queue NIC or veth). Every worker binds an AF_XDP
// socket to that one queue (they share the UMEM's fill ring); this program puts each frame
// into one of them by a hash of its flow, as a NIC's RSS would have put it on a queue.
//
// The hash: IPv4 source ^ destination ^ protocol, ^ the first 32 bits past the header
// (the ports) for unfragmented UDP and TCP with no options; multiplied by 2^32/phi and
// its top 6 bits kept: a slot 0..63 of `fwd_xsks`. The forwarder fills all 64 slots, slot
// k with worker k % workers's socket. Frames that are not IPv4 (ARP, IPv6) use slot 0, so
// the forwarder counts them with a reason like any other frame. An empty slot (the
// forwarder is starting or stopping) passes the frame to the kernel's stack.
//
// Built by forwarder-under-test/build.rs with clang -target bpf when clang is there;
// `nic::afxdp::spread_slot` is the same hash in Rust.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define FWD_SPREAD_SLOTS 64

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, FWD_SPREAD_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} fwd_xsks SEC(".maps");

SEC("xdp")
int fwd_xdp_spread(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 slot = 0;

	if ((void *)(eth + 1) <= end && eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) <= end) {
			__u32 h = ip->saddr ^ ip->daddr ^ ip->protocol;

			if ((ip->protocol == IPPROTO_UDP || ip->protocol == IPPROTO_TCP) && ip->ihl == 5 &&
			    !(ip->frag_off & bpf_htons(0x3fff))) {
				__u32 *ports = (void *)(ip + 1);

				if ((void *)(ports + 1) <= end)
					h ^= *ports;
			}
			slot = (h * 0x9E3779B1u) >> 26;
		}
	}
	return bpf_redirect_map(&fwd_xsks, slot, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
