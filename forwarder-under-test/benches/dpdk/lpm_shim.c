/* DPDK's rte_lpm and rte_fib (DIR24_8) behind a few plain functions, for the fib_vs_dpdk
 * benchmark (benches/fib_vs_dpdk.rs). Their lookups are inline functions in DPDK's headers,
 * so they are compiled here, against the installed headers (pkg-config libdpdk), by the
 * package's build script, and linked into the benchmarks only. Each run function walks a
 * whole address stream in C, so no call crosses the language boundary per lookup. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lpm.h>
#include <rte_fib.h>

/* The EAL without hugepages, PCI or telemetry, in memory only (no files under
 * /var/run/dpdk): enough for rte_malloc'd tables. `mem_mb` is the memory it reserves. */
int fs_dpdk_init(unsigned mem_mb, char *err, size_t err_len)
{
	char mem[32], prefix[64];
	snprintf(mem, sizeof(mem), "%u", mem_mb);
	snprintf(prefix, sizeof(prefix), "fwdscope-bench-%d", (int)getpid());
	char *argv[] = {"fwdscope-bench", "--no-huge", "-m", mem, "--no-pci", "--no-telemetry",
			"--no-shconf", "--file-prefix", prefix, "--log-level=lib.*:error", NULL};
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
	if (rte_eal_init(argc, argv) < 0) {
		snprintf(err, err_len, "rte_eal_init: %s", rte_strerror(rte_errno));
		return -1;
	}
	return 0;
}

void fs_dpdk_cleanup(void) { rte_eal_cleanup(); }

void *fs_lpm_create(uint32_t max_rules, uint32_t tbl8s)
{
	struct rte_lpm_config c = {.max_rules = max_rules, .number_tbl8s = tbl8s, .flags = 0};
	return rte_lpm_create("fwdscope_lpm", SOCKET_ID_ANY, &c);
}

int fs_lpm_add(void *lpm, uint32_t ip, uint8_t depth, uint32_t nh)
{
	return rte_lpm_add((struct rte_lpm *)lpm, ip, depth, nh);
}

void fs_lpm_free(void *lpm) { rte_lpm_free((struct rte_lpm *)lpm); }

/* Look up `n` addresses: one at a time (`chunk` 1), four by rte_lpm_lookupx4 (4), or in
 * bulks of `chunk` by rte_lpm_lookup_bulk. A miss gives UINT32_MAX (fwdscope's NO_ROUTE). */
void fs_lpm_run(const void *p, const uint32_t *ips, uint32_t *out, size_t n, unsigned chunk)
{
	const struct rte_lpm *lpm = p;
	size_t i = 0;
	if (chunk == 1) {
		for (; i < n; i++) {
			uint32_t nh;
			out[i] = rte_lpm_lookup(lpm, ips[i], &nh) == 0 ? nh : UINT32_MAX;
		}
		return;
	}
	if (chunk == 4) {
		for (; i + 4 <= n; i += 4) {
			xmm_t v = _mm_loadu_si128((const __m128i *)&ips[i]);
			rte_lpm_lookupx4(lpm, v, &out[i], UINT32_MAX);
		}
	} else {
		uint32_t hops[64];
		if (chunk > 64)
			chunk = 64;
		for (; i + chunk <= n; i += chunk) {
			rte_lpm_lookup_bulk(lpm, &ips[i], hops, chunk);
			for (unsigned k = 0; k < chunk; k++)
				out[i + k] = (hops[k] & RTE_LPM_LOOKUP_SUCCESS) ? (hops[k] & 0x00ffffff) : UINT32_MAX;
		}
	}
	for (; i < n; i++) {
		uint32_t nh;
		out[i] = rte_lpm_lookup(lpm, ips[i], &nh) == 0 ? nh : UINT32_MAX;
	}
}

/* rte_fib of type DIR24_8 with 4-byte next hops; a miss gives `UINT32_MAX >> 1` (the
 * largest next hop a 4-byte DIR24_8 entry holds), turned into UINT32_MAX on the way out. */
#define FS_FIB_MISS ((uint64_t)(UINT32_MAX >> 1))

void *fs_fib_create(int max_routes, uint32_t tbl8s)
{
	struct rte_fib_conf c;
	memset(&c, 0, sizeof(c));
	c.type = RTE_FIB_DIR24_8;
	c.default_nh = FS_FIB_MISS;
	c.max_routes = max_routes;
	c.dir24_8.nh_sz = RTE_FIB_DIR24_8_4B;
	c.dir24_8.num_tbl8 = tbl8s;
	return rte_fib_create("fwdscope_fib", SOCKET_ID_ANY, &c);
}

int fs_fib_add(void *fib, uint32_t ip, uint8_t depth, uint32_t nh)
{
	return rte_fib_add((struct rte_fib *)fib, ip, depth, nh);
}

void fs_fib_free(void *fib) { rte_fib_free((struct rte_fib *)fib); }

/* Look up `n` addresses through rte_fib_lookup_bulk in bulks of `chunk` (1 for one at a
 * time). A miss gives UINT32_MAX. */
void fs_fib_run(void *p, uint32_t *ips, uint32_t *out, size_t n, unsigned chunk)
{
	struct rte_fib *fib = p;
	uint64_t hops[64];
	if (chunk == 0)
		chunk = 1;
	if (chunk > 64)
		chunk = 64;
	for (size_t i = 0; i < n; i += chunk) {
		unsigned m = (n - i < chunk) ? (unsigned)(n - i) : chunk;
		rte_fib_lookup_bulk(fib, &ips[i], hops, (int)m);
		for (unsigned k = 0; k < m; k++)
			out[i + k] = hops[k] == FS_FIB_MISS ? UINT32_MAX : (uint32_t)hops[k];
	}
}
