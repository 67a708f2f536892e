/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The registration cache (mr_cache.h) and its memory monitor (mem_monitor.h), on the
 * software device: hits, invalidation when the memory goes (munmap, free of a block
 * malloc mapped, madvise), eviction under the count and byte limits, entries in use
 * never evicted; then end to end through the public API: a read-based message from a
 * buffer with no descriptor, the buffer unmapped and mapped again at the same address
 * with other contents, the message again.
 *
 * The software device reads memory by virtual address when it moves data, so a stale
 * registration would still carry the new contents there (hardware pins the old pages);
 * what shows the monitor at work is the cache's statistics: the second use is a miss
 * after an invalidation, where without the monitor it would be a hit.
 */
#include "domain.h"
#include "mem_monitor.h"
#include "mr_cache.h"
#include "verbs/api.h"
#include "verbs/device.h"

#include <criterion/criterion.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

using namespace efa;

namespace {

struct Dev {
	std::unique_ptr<verbs::Device> dev;
	verbs::Pd pd;
	Dev()
	{
		std::string why;
		const verbs::Api *api = verbs::load_sim(EFA_TEST_SIM_PATH, &why);
		cr_assert_not_null(api, "%s", why.c_str());
		auto devs = verbs::Device::discover(*api);
		cr_assert_eq(devs.size(), 1u);
		dev = std::move(devs[0]);
		auto p = verbs::Pd::alloc(*dev);
		cr_assert(p.ok());
		pd = p.take();
	}
};

/* Skips (visibly) where the kernel offers no userfaultfd: the cache then does not cache,
 * which test_uncached_without_cache checks. */
void need_monitor()
{
	MemMonitor *m = MemMonitor::acquire();
	if (!m)
		cr_skip_test("userfaultfd is not available here: registrations are not cached");
	MemMonitor::release();
}

void *map(size_t len, void *at = nullptr)
{
	void *p = mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0),
		       -1, 0);
	cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
	return p;
}

} // namespace

Test(mr_cache, hit_then_invalidated_by_munmap)
{
	need_monitor();
	Dev d;
	MrCache c(d.pd, true, 16, size_t(1) << 30);
	const size_t len = 1 << 20;
	void *buf = map(len);
	{
		InternalMr a, b;
		cr_assert_eq(c.get(buf, len, a), 0);
		cr_assert(a.cached());
		cr_assert_eq(c.get(static_cast<char *>(buf) + 4096, 8192, b), 0, "a range inside a cached one");
		cr_assert(b.cached());
		cr_assert_eq(a.rkey(), b.rkey(), "the same registration");
	}
	MrCacheStats s = c.stats();
	cr_assert_eq(s.misses, 1u);
	cr_assert_eq(s.hits, 1u);
	cr_assert_eq(s.entries, 1u);
	cr_assert_eq(s.in_use, 0u);

	/* The memory goes and comes back at the same address. */
	cr_assert_eq(munmap(buf, len), 0);
	void *again = map(len, buf);
	cr_assert_eq(again, buf);
	s = c.stats();
	cr_assert_eq(s.invalidations, 1u, "munmap invalidated the entry");
	cr_assert_eq(s.entries, 0u);
	InternalMr a2;
	cr_assert_eq(c.get(buf, len, a2), 0);
	s = c.stats();
	cr_assert_eq(s.misses, 2u, "the new mapping is registered anew");
	cr_assert_eq(s.hits, 1u);
	a2.reset();
	munmap(buf, len);
}

Test(mr_cache, invalidated_by_free_and_madvise)
{
	need_monitor();
	Dev d;
	MrCache c(d.pd, true, 16, size_t(1) << 30);
#if defined(__SANITIZE_ADDRESS__)
	/* AddressSanitizer's allocator keeps freed blocks in quarantine: free() unmaps
	 * nothing there. */
	const bool by_free = false;
#else
	const bool by_free = true;
#endif
	/* Above glibc's mmap threshold: free() unmaps it (through glibc's own munmap). */
	const size_t len = 4 << 20;
	char *blk = static_cast<char *>(malloc(len));
	cr_assert_not_null(blk);
	memset(blk, 1, len);
	{
		InternalMr m;
		cr_assert_eq(c.get(blk + 100, 65536, m), 0);
		cr_assert(m.cached());
	}
	free(blk);
	const uint64_t after_free = by_free ? 1 : 0;
	if (by_free)
		cr_assert_eq(c.stats().invalidations, 1u, "free() of a mapped block invalidated the entry");

	void *p = map(1 << 20);
	{
		InternalMr m;
		cr_assert_eq(c.get(p, 1 << 20, m), 0);
	}
	cr_assert_eq(madvise(p, 4096, MADV_DONTNEED), 0);
	cr_assert_eq(c.stats().invalidations, after_free + 1, "madvise(MADV_DONTNEED) invalidated the entry");
	munmap(p, 1 << 20);
}

Test(mr_cache, in_use_entry_outlives_its_invalidation)
{
	need_monitor();
	Dev d;
	MrCache c(d.pd, true, 16, size_t(1) << 30);
	void *buf = map(65536);
	InternalMr held;
	cr_assert_eq(c.get(buf, 65536, held), 0);
	const uint32_t lkey = held.lkey();
	cr_assert_eq(munmap(buf, 65536), 0);
	MrCacheStats s = c.stats();
	cr_assert_eq(s.invalidations, 1u);
	cr_assert_eq(s.entries, 0u, "out of the index");
	cr_assert_eq(s.in_use, 1u, "still held");
	cr_assert_eq(held.lkey(), lkey);
	held.reset(); /* freed now */
	cr_assert_eq(c.stats().in_use, 0u);
}

Test(mr_cache, eviction_by_count_lru_never_in_use)
{
	need_monitor();
	Dev d;
	MrCache c(d.pd, true, 2, size_t(1) << 30);
	void *b[4];
	for (auto &p : b)
		p = map(65536);
	{
		InternalMr m0, m1;
		cr_assert_eq(c.get(b[0], 65536, m0), 0);
		cr_assert_eq(c.get(b[1], 65536, m1), 0);
		/* Both in use: a third cannot evict them, it is registered for its use only. */
		InternalMr m2;
		cr_assert_eq(c.get(b[2], 65536, m2), 0);
		cr_assert_not(m2.cached());
		MrCacheStats s = c.stats();
		cr_assert_eq(s.entries, 2u);
		cr_assert_eq(s.evictions, 0u);
		cr_assert_eq(s.uncached, 1u);
		m1.reset();
		m0.reset(); /* b[1] is now the least recently used */
	}
	{
		InternalMr m;
		cr_assert_eq(c.get(b[0], 65536, m), 0); /* a hit; b[0] most recent */
	}
	{
		InternalMr m3;
		cr_assert_eq(c.get(b[3], 65536, m3), 0);
		cr_assert(m3.cached());
	}
	MrCacheStats s = c.stats();
	cr_assert_eq(s.evictions, 1u);
	cr_assert_eq(s.entries, 2u);
	{
		InternalMr m;
		cr_assert_eq(c.get(b[0], 65536, m), 0);
	}
	cr_assert_eq(c.stats().hits, 2u, "b[0] stayed: b[1], the least recently used, went");
	for (auto &p : b)
		munmap(p, 65536);
}

Test(mr_cache, eviction_by_bytes)
{
	need_monitor();
	Dev d;
	MrCache c(d.pd, true, 100, 3 * 65536);
	void *b[4];
	for (auto &p : b)
		p = map(65536);
	for (auto &p : b) {
		InternalMr m;
		cr_assert_eq(c.get(p, 65536, m), 0);
	}
	MrCacheStats s = c.stats();
	cr_assert_leq(s.bytes, size_t(3 * 65536));
	cr_assert_eq(s.evictions, 1u);
	for (auto &p : b)
		munmap(p, 65536);
}

Test(mr_cache, uncached_without_cache)
{
	Dev d;
	MrCache c(d.pd, false, 16, size_t(1) << 30);
	void *buf = map(65536);
	for (int i = 0; i < 3; i++) {
		InternalMr m;
		cr_assert_eq(c.get(buf, 65536, m), 0);
		cr_assert(bool(m));
		cr_assert_not(m.cached());
	}
	MrCacheStats s = c.stats();
	cr_assert_eq(s.uncached, 3u);
	cr_assert_eq(s.hits + s.misses, 0u);
	munmap(buf, 65536);
}

/* ------------------------------------------------------------------ end to end */

namespace {

struct Side {
	fid_ep *ep = nullptr;
	fid_cq *cq = nullptr;
	fi_addr_t addr = FI_ADDR_UNSPEC;
};

/* Both completions, reading both CQs (each endpoint progresses when its CQ is read). */
void wait_both(fid_cq *a, void *ca, fid_cq *b, void *cb)
{
	bool got_a = false, got_b = false;
	for (long spins = 0; spins < 100000000 && !(got_a && got_b); spins++) {
		for (int i = 0; i < 2; i++) {
			fid_cq *cq = i ? b : a;
			fi_cq_tagged_entry e;
			ssize_t n = fi_cq_read(cq, &e, 1);
			if (n == 1) {
				cr_assert_eq(e.op_context, i ? cb : ca);
				(i ? got_b : got_a) = true;
			} else if (n == -FI_EAVAIL) {
				fi_cq_err_entry err{};
				fi_cq_readerr(cq, &err, 0);
				cr_assert_fail("completion error %d: %s", err.err, fi_strerror(err.err));
			} else {
				cr_assert_eq(n, -FI_EAGAIN);
			}
		}
	}
	cr_assert(got_a && got_b, "no completion (send %d, receive %d)", got_a, got_b);
}

} // namespace

Test(mr_cache_e2e, unmapped_and_remapped_buffer_sends_its_new_contents)
{
	need_monitor();
	setenv("FI_PROVIDER_PATH", EFA_TEST_PROV_DIR, 1);
	setenv("FI_PROVIDER", "efa", 1);
	setenv("FI_EFA_SIM", "1", 1);
	setenv("FI_EFA_SIM_PATH", EFA_TEST_SIM_PATH, 1);
	setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 0); /* the device path */
	setenv("EFASIM_PORT_BASE", "46800", 1);
	fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("efa");
	hints->fabric_attr->name = strdup("efa");
	fi_info *info = nullptr;
	cr_assert_eq(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), 0);
	fid_fabric *fab;
	fid_domain *dom;
	fid_av *av;
	cr_assert_eq(fi_fabric(info->fabric_attr, &fab, nullptr), 0);
	cr_assert_eq(fi_domain(fab, info, &dom, nullptr), 0);
	fi_av_attr aa{};
	aa.type = FI_AV_TABLE;
	cr_assert_eq(fi_av_open(dom, &aa, &av, nullptr), 0);
	Side s[2];
	for (Side &x : s) {
		fi_cq_attr ca{};
		ca.format = FI_CQ_FORMAT_TAGGED;
		cr_assert_eq(fi_cq_open(dom, &ca, &x.cq, nullptr), 0);
		cr_assert_eq(fi_endpoint(dom, info, &x.ep, nullptr), 0);
		cr_assert_eq(fi_ep_bind(x.ep, &av->fid, 0), 0);
		cr_assert_eq(fi_ep_bind(x.ep, &x.cq->fid, FI_TRANSMIT | FI_RECV), 0);
		cr_assert_eq(fi_enable(x.ep), 0);
		char name[64];
		size_t nl = sizeof name;
		cr_assert_eq(fi_getname(&x.ep->fid, name, &nl), 0);
		cr_assert_eq(fi_av_insert(av, name, 1, &x.addr, 0, nullptr), 1);
	}
	/* Read-based on the software device (beyond 64 KiB), from and to buffers without
	 * descriptors: both ends register through the cache. */
	const size_t len = 256 * 1024;
	auto *src = static_cast<uint8_t *>(map(len));
	auto *dst = static_cast<uint8_t *>(map(len));
	MrCache &cache = *reinterpret_cast<Domain *>(dom)->mr_cache;
	fi_context2 rc, sc;
	/* A small message each way first: the read-based protocol needs the peer's
	 * handshake (its device features). */
	for (int i = 0; i < 2; i++) {
		uint64_t in = 0, out = 1;
		cr_assert_eq(fi_trecv(s[1 - i].ep, &in, sizeof in, nullptr, FI_ADDR_UNSPEC, 1, 0, &rc), 0);
		cr_assert_eq(fi_tsend(s[i].ep, &out, sizeof out, nullptr, s[1 - i].addr, 1, &sc), 0);
		wait_both(s[i].cq, &sc, s[1 - i].cq, &rc);
		cr_assert_eq(in, 1u);
	}
	for (int round = 0; round < 2; round++) {
		memset(src, 0x10 + round, len);
		memset(dst, 0, len);
		cr_assert_eq(fi_trecv(s[1].ep, dst, len, nullptr, FI_ADDR_UNSPEC, 7, 0, &rc), 0);
		cr_assert_eq(fi_tsend(s[0].ep, src, len, nullptr, s[1].addr, 7, &sc), 0);
		wait_both(s[0].cq, &sc, s[1].cq, &rc);
		for (size_t i = 0; i < len; i++)
			cr_assert_eq(dst[i], 0x10 + round, "round %d byte %zu: %#x", round, i, dst[i]);
		const MrCacheStats st = cache.stats();
		if (round == 0) {
			cr_assert_eq(st.misses, 2u, "the source and the destination registered (misses %lu hits %lu uncached %lu)", (unsigned long)st.misses, (unsigned long)st.hits, (unsigned long)st.uncached);
			cr_assert_eq(st.invalidations, 0u);
			/* The source goes and comes back at the same address, other contents. */
			cr_assert_eq(munmap(src, len), 0);
			cr_assert_eq(map(len, src), src);
		} else {
			cr_assert_eq(st.invalidations, 1u, "the unmapped source's entry was dropped");
			cr_assert_eq(st.misses, 3u, "the new source registered anew");
			cr_assert_eq(st.hits, 1u, "the destination's entry reused");
		}
	}
	for (Side &x : s) {
		fi_close(&x.ep->fid);
		fi_close(&x.cq->fid);
	}
	fi_close(&av->fid);
	fi_close(&dom->fid);
	fi_close(&fab->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	munmap(src, len);
	munmap(dst, len);
}
