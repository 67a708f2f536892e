/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Bounded memory on the efa fabric (fi_efa(7), "MEMORY"), through libfabric's public API
 * on the software device, two endpoints in this process:
 *
 *   - a sender floods a receiver that posts no receive with 3,000 messages of 4 KiB
 *     (12 MB): the receiver keeps at most FI_EFA_RX_COPY_MAX bytes of copies (256 KiB
 *     here), then its receive buffers, and the sender meets receiver-not-ready; the
 *     process's heap grows by less than 4 MiB (every packet in an MTU-sized copy, as
 *     before, would hold 27 MB; with the limit lifted this test fails). Then the
 *     receiver posts its receives: every message arrives, in order, intact.
 *   - after that the copies are given back: the heap returns to within 2 MiB of where
 *     it was before the flood (what stays: operation pools at their high-water mark,
 *     each bounded by its limit, and a few spare copies).
 */
#include "fitest.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>

#include <malloc.h>

#include <chrono>
#include <vector>

namespace {

using fitest::Side;

fi_info *g_info;
fid_fabric *g_fab;
Side g_tx, g_rx;

/* A pair of efa-fabric endpoints on the device path, and their end. */
void open_all()
{
	fitest::use_provider();
	setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 1);
	g_info = fitest::getinfo("efa", FI_TAGGED);
	fitest::open_fabric(g_info, &g_fab);
	fitest::open_pair(g_fab, g_info, g_tx, g_rx, 4096);
}

void close_all()
{
	fitest::close_side(g_tx);
	fitest::close_side(g_rx);
	fi_close(&g_fab->fid);
	fi_freeinfo(g_info);
}

size_t heap_in_use()
{
	const struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

/* Completions read from cq (errors fail the test). */
int drain(fid_cq *cq, std::vector<fi_cq_tagged_entry> *out = nullptr)
{
	fi_cq_tagged_entry e[64];
	const ssize_t n = fi_cq_read(cq, e, 64);
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		fi_cq_err_entry err{};
		fi_cq_readerr(cq, &err, 0);
		cr_assert_fail("error completion: %s (prov_errno %d)", fi_strerror(err.err), err.prov_errno);
	}
	cr_assert_gt(n, 0, "fi_cq_read: %s", fi_strerror(int(-n)));
	if (out)
		out->insert(out->end(), e, e + n);
	return int(n);
}

} // namespace

Test(memory, unexpected_flood_is_bounded_and_delivered, .timeout = 120, .init = [] {
	setenv("FI_EFA_RX_COPY_MAX", "262144", 1);
	setenv("FI_EFA_MAX_TIMEOUT", "2000", 1); /* receiver-not-ready backoff: at most 2 ms */
})
{
	open_all();

	constexpr size_t kMsgs = 3000, kLen = 4096;
	std::vector<uint8_t> src(kMsgs * kLen), dst(kMsgs * kLen, 0);
	for (size_t i = 0; i < src.size(); i++)
		src[i] = uint8_t(i * 7 + i / kLen);
	const size_t before = heap_in_use();
	size_t peak = before;

	/* The flood: post until every message is out or the sender is stuck on -FI_EAGAIN
	 * (the receiver refuses), reading both CQs. */
	size_t posted = 0, sent = 0;
	int stuck = 0;
	while (posted < kMsgs && stuck < 20000) {
		const ssize_t r = fi_tsend(g_tx.ep, src.data() + posted * kLen, kLen, nullptr, g_tx.peer, posted, nullptr);
		if (r == 0) {
			posted++;
			stuck = 0;
		} else {
			cr_assert_eq(r, -FI_EAGAIN, "fi_tsend: %s", fi_strerror(int(-r)));
			stuck++;
		}
		sent += size_t(drain(g_tx.cq));
		cr_assert_eq(drain(g_rx.cq), 0, "a completion at the receiver before any receive");
		peak = std::max(peak, heap_in_use());
	}
	cr_assert_lt(posted, kMsgs, "the receiver took all %zu unexpected messages: nothing bounded it", kMsgs);
	cr_assert_lt(peak - before, size_t(4) << 20, "the heap grew by %zu bytes during the flood", peak - before);

	/* The receives, in order: every message arrives whole, and the rest get out. */
	std::vector<fi_cq_tagged_entry> got;
	size_t recvs = 0;
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(90);
	while ((got.size() < kMsgs || sent < kMsgs) && std::chrono::steady_clock::now() < end) {
		if (recvs < kMsgs) {
			const ssize_t r = fi_trecv(g_rx.ep, dst.data() + recvs * kLen, kLen, nullptr, FI_ADDR_UNSPEC, recvs, 0,
						   nullptr);
			if (r == 0)
				recvs++;
			else
				cr_assert_eq(r, -FI_EAGAIN);
		}
		if (posted < kMsgs &&
		    fi_tsend(g_tx.ep, src.data() + posted * kLen, kLen, nullptr, g_tx.peer, posted, nullptr) == 0)
			posted++;
		sent += size_t(drain(g_tx.cq));
		drain(g_rx.cq, &got);
	}
	cr_assert(got.size() == kMsgs && sent == kMsgs, "received %zu, sends completed %zu of %zu", got.size(), sent, kMsgs);
	for (size_t i = 0; i < kMsgs; i++)
		cr_assert_eq(got[i].len, kLen);
	cr_assert_eq(memcmp(src.data(), dst.data(), src.size()), 0, "data");
	cr_assert_lt(heap_in_use(), before + (size_t(2) << 20), "copies not given back: %zu bytes over the start",
		     heap_in_use() - before);
	close_all();
}

/* An endpoint closed while it holds receive buffers and copies for unexpected messages
 * nobody received: the close releases them (no repost to a destroyed QP, no copy left
 * behind), and the sender's endpoint closes too. */
Test(memory, close_with_unexpected_messages_held, .timeout = 60, .init = [] {
	setenv("FI_EFA_RX_COPY_MAX", "65536", 1);
	setenv("FI_EFA_MAX_TIMEOUT", "2000", 1);
})
{
	open_all();
	constexpr size_t kMsgs = 600, kLen = 2048;
	std::vector<uint8_t> src(kLen, 3);
	size_t posted = 0;
	int stuck = 0;
	while (posted < kMsgs && stuck < 20000) {
		if (fi_tsend(g_tx.ep, src.data(), kLen, nullptr, g_tx.peer, posted, nullptr) == 0) {
			posted++;
			stuck = 0;
		} else {
			stuck++;
		}
		drain(g_tx.cq);
		cr_assert_eq(drain(g_rx.cq), 0);
	}
	cr_assert_lt(posted, kMsgs, "nothing was held");
	fitest::close_side(g_rx);
	fitest::close_side(g_tx);
	fi_close(&g_fab->fid);
	fi_freeinfo(g_info);
}
