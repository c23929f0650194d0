// SPDX-License-Identifier: GPL-2.0
//
// A program the verifier refuses: it reads a byte of the packet without checking the
// packet is that long. Only the lab's test of how a refusal is reported loads it
// (`xdp::tests`); built by lab/build.rs beside xdp_fwd.c.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int fwd_xdp_refused(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;

	return data[20] ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
