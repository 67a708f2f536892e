/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Remote writes with CQ data never overrun the target's device CQ (efa fabric).
 *
 * An initiator I posts 20 000 fi_writedata of 64 bytes to a target T that reads no CQ
 * (after one message each way, so that I knows T's features). I reads only its own CQ,
 * retrying on -FI_EAGAIN, until it can go no further; then T reads its CQ while I
 * finishes. Every remote CQ data a write brings takes an entry of T's device CQ: it must
 * be one the target reserved, so the device's count of CQ overruns (efasim_query_stats)
 * stays 0, and T gets exactly one completion per write, with its data.
 * One process, two endpoints of one domain; the device is found through the library the
 * provider loaded.
 */
#include "fitest.h"
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <criterion/criterion.h>

#include <infiniband/verbs.h>
#include <dlfcn.h>

#include "loaded_sim.h"

#include <chrono>
#include <cstring>
#include <set>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Ep {
	fid_ep *ep = nullptr;
	fid_cq *cq = nullptr;
	uint8_t addr[32] = {};
};

fi_info *g_info;
fid_fabric *g_fab;
fid_domain *g_dom;
fid_av *g_av;

Ep open_ep()
{
	Ep e;
	cr_assert_eq(fi_endpoint(g_dom, g_info, &e.ep, nullptr), 0);
	fi_cq_attr attr{};
	attr.format = FI_CQ_FORMAT_DATA;
	attr.size = 64;
	cr_assert_eq(fi_cq_open(g_dom, &attr, &e.cq, nullptr), 0);
	cr_assert_eq(fi_ep_bind(e.ep, &e.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(e.ep, &g_av->fid, 0), 0);
	cr_assert_eq(fi_enable(e.ep), 0);
	size_t len = sizeof e.addr;
	cr_assert_eq(fi_getname(&e.ep->fid, e.addr, &len), 0);
	return e;
}

uint64_t cq_overruns() { return loaded_sim_stats().cq_overruns; }

/* One entry of cq, successful (fails on an error entry), or false when none is there. */
bool read_one(fid_cq *cq, fi_cq_data_entry &e)
{
	ssize_t n = fi_cq_read(cq, &e, 1);
	if (n == 1)
		return true;
	if (n == -FI_EAVAIL) {
		fi_cq_err_entry err{};
		fi_cq_readerr(cq, &err, 0);
		cr_assert_fail("error completion: %s (prov_errno %d)", fi_strerror(err.err), err.prov_errno);
	}
	cr_assert_eq(n, -FI_EAGAIN, "fi_cq_read: %zd", n);
	return false;
}

} // namespace

Test(cq_bound, remote_writes_with_data_never_overrun_the_target_cq)
{
	g_info = fitest::getinfo("efa", FI_MSG | FI_RMA);
	fitest::open_fabric(g_info, &g_fab, &g_dom);
	fi_av_attr aa{};
	aa.type = FI_AV_TABLE;
	cr_assert_eq(fi_av_open(g_dom, &aa, &g_av, nullptr), 0);
	Ep ini = open_ep(), tgt = open_ep();
	fi_addr_t fa[2];
	cr_assert_eq(fi_av_insert(g_av, ini.addr, 1, &fa[0], 0, nullptr), 1);
	cr_assert_eq(fi_av_insert(g_av, tgt.addr, 1, &fa[1], 0, nullptr), 1);

	constexpr size_t kWrites = 20000, kLen = 64;
	std::vector<uint8_t> src(kLen, 0x3c), region(kLen);
	fid_mr *smr = nullptr, *rmr = nullptr;
	cr_assert_eq(fi_mr_reg(g_dom, src.data(), src.size(), FI_WRITE | FI_SEND | FI_RECV, 0, 0, 0, &smr, nullptr), 0);
	cr_assert_eq(fi_mr_reg(g_dom, region.data(), region.size(), FI_REMOTE_WRITE | FI_SEND | FI_RECV, 0, 0, 0, &rmr,
			       nullptr),
		     0);
	void *desc = fi_mr_desc(smr);

	/* One message each way: I learns T's features (device RDMA write). */
	fi_context2 c1{}, c2{}, c3{}, c4{};
	cr_assert_eq(fi_recv(tgt.ep, region.data(), kLen, fi_mr_desc(rmr), FI_ADDR_UNSPEC, &c1), 0);
	cr_assert_eq(fi_send(ini.ep, src.data(), 8, desc, fa[1], &c2), 0);
	cr_assert_eq(fi_recv(ini.ep, src.data() + 32, 8, desc, FI_ADDR_UNSPEC, &c3), 0);
	cr_assert_eq(fi_send(tgt.ep, region.data() + 32, 8, fi_mr_desc(rmr), fa[0], &c4), 0);
	for (int got = 0; got < 4;) {
		fi_cq_data_entry e;
		got += read_one(ini.cq, e);
		got += read_one(tgt.cq, e);
	}

	/* T sleeps: I writes until it can go no further (or is done). */
	const uint64_t overruns_before = cq_overruns();
	std::vector<fi_context2> ctx(kWrites);
	size_t posted = 0, done = 0;
	auto post_some = [&] {
		while (posted < kWrites) {
			ssize_t r = fi_writedata(ini.ep, src.data(), kLen, desc, 0x5000 + posted, fa[1],
						 uint64_t(reinterpret_cast<uintptr_t>(region.data())), fi_mr_key(rmr),
						 &ctx[posted]);
			if (r == -FI_EAGAIN)
				return;
			cr_assert_eq(r, 0, "fi_writedata: %s", fi_strerror(int(-r)));
			posted++;
		}
	};
	for (int idle = 0; idle < 100000 && done < kWrites; idle++) {
		post_some();
		fi_cq_data_entry e;
		while (read_one(ini.cq, e)) {
			done++;
			idle = 0;
		}
	}
	const uint64_t overruns_asleep = cq_overruns() - overruns_before;
	cr_log_info("while the target slept: %zu writes posted, %zu completed, device CQ overruns %lu", posted, done,
		    (unsigned long)overruns_asleep);

	/* T wakes up; I finishes. */
	std::set<uint64_t> data;
	const auto end = Clock::now() + std::chrono::seconds(60);
	while (done < kWrites || data.size() < kWrites) {
		cr_assert(Clock::now() < end, "%zu of %zu writes completed, %zu remote completions", done, kWrites,
			  data.size());
		post_some();
		fi_cq_data_entry e;
		while (read_one(ini.cq, e))
			done++;
		while (read_one(tgt.cq, e)) {
			cr_assert_eq(e.flags & (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA),
				     FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, "flags %#lx", (unsigned long)e.flags);
			cr_assert(e.data >= 0x5000 && e.data < 0x5000 + kWrites && data.insert(e.data).second,
				  "remote CQ data %#lx: not a write's, or twice", (unsigned long)e.data);
		}
	}
	const uint64_t overruns = cq_overruns() - overruns_before;
	cr_assert_eq(overruns, 0u, "the target's device CQ overran %lu times (%lu while it slept)",
		     (unsigned long)overruns, (unsigned long)overruns_asleep);
	cr_assert_eq(memcmp(region.data(), src.data(), kLen), 0);

	fi_close(&ini.ep->fid);
	fi_close(&tgt.ep->fid);
	fi_close(&ini.cq->fid);
	fi_close(&tgt.cq->fid);
	fi_close(&smr->fid);
	fi_close(&rmr->fid);
	fi_close(&g_av->fid);
	fi_close(&g_dom->fid);
	fi_close(&g_fab->fid);
	fi_freeinfo(g_info);
}
