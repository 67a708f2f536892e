/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Resource exhaustion through the public libfabric API, on both fabrics: a full send
 * queue, a CQ smaller than the completions it gets, a receiver that never posts, and
 * memory registration beyond the device's limit. Each ends in -FI_EAGAIN or a clear
 * error, never in a lost or corrupt completion, and each recovers: the same objects
 * work afterwards, with the data checked.
 *
 * Endpoints live in one process; reading a CQ (or a counter) is what drives the
 * provider (manual progress), so a test controls exactly who makes progress.
 */
#include "fitest.h"
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_efa.h>

#include <criterion/criterion.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace {

struct Ep {
	fid_ep *ep = nullptr;
	fid_cq *cq = nullptr;
	fid_cntr *cntr = nullptr; /* FI_SEND events */
	uint8_t name[32] = {};
};

struct World {
	bool rdm = false;
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	fid_domain *dom = nullptr;
	fid_av *av = nullptr;
	std::vector<Ep> eps;
	std::vector<uint8_t> buf;
	fid_mr *mr = nullptr;
	void *desc = nullptr;
};

World g;

/* Requested keys: the efa fabric without FI_RMA uses the key the application asks for,
 * unique in the domain. */
uint64_t next_key = 1;

void open_world(bool rdm, size_t buf_len = 1 << 20)
{
	g.rdm = rdm;
	g.info = fitest::getinfo(rdm ? "efa" : "efa-direct", FI_MSG, fitest::kMrMode,
				 [](fi_info *h) { h->domain_attr->resource_mgmt = FI_RM_ENABLED; });
	fitest::open_fabric(g.info, &g.fab, &g.dom);
	fi_av_attr aa{};
	aa.type = FI_AV_TABLE;
	cr_assert_eq(fi_av_open(g.dom, &aa, &g.av, nullptr), 0);
	if (buf_len) {
		g.buf.assign(buf_len, 0);
		cr_assert_eq(fi_mr_reg(g.dom, g.buf.data(), g.buf.size(), FI_SEND | FI_RECV, 0, next_key++, 0, &g.mr, nullptr), 0);
		g.desc = fi_mr_desc(g.mr);
	}
}

/* An endpoint with its own CQ of `cq_size` entries and a send counter; `setup` runs
 * between fi_endpoint and fi_enable (options). */
size_t add_ep(size_t cq_size, void (*setup)(fid_ep *) = nullptr)
{
	Ep e;
	cr_assert_eq(fi_endpoint(g.dom, g.info, &e.ep, nullptr), 0);
	if (setup)
		setup(e.ep);
	fi_cq_attr ca{};
	ca.format = FI_CQ_FORMAT_DATA;
	ca.size = cq_size;
	cr_assert_eq(fi_cq_open(g.dom, &ca, &e.cq, nullptr), 0);
	fi_cntr_attr ta{};
	ta.events = FI_CNTR_EVENTS_COMP;
	cr_assert_eq(fi_cntr_open(g.dom, &ta, &e.cntr, nullptr), 0);
	cr_assert_eq(fi_ep_bind(e.ep, &e.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(e.ep, &e.cntr->fid, FI_SEND), 0);
	cr_assert_eq(fi_ep_bind(e.ep, &g.av->fid, 0), 0);
	cr_assert_eq(fi_enable(e.ep), 0);
	size_t len = sizeof e.name;
	cr_assert_eq(fi_getname(&e.ep->fid, e.name, &len), 0);
	g.eps.push_back(e);
	return g.eps.size() - 1;
}

fi_addr_t insert(size_t i)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	cr_assert_eq(fi_av_insert(g.av, g.eps[i].name, 1, &a, 0, nullptr), 1);
	return a;
}

void teardown()
{
	for (Ep &e : g.eps) {
		cr_assert_eq(fi_close(&e.ep->fid), 0, "a clean close");
		cr_assert_eq(fi_close(&e.cq->fid), 0);
		cr_assert_eq(fi_close(&e.cntr->fid), 0);
	}
	if (g.mr)
		cr_assert_eq(fi_close(&g.mr->fid), 0);
	if (g.av)
		cr_assert_eq(fi_close(&g.av->fid), 0);
	if (g.dom)
		cr_assert_eq(fi_close(&g.dom->fid), 0);
	if (g.fab)
		cr_assert_eq(fi_close(&g.fab->fid), 0);
	fi_freeinfo(g.info);
	g = World{};
}

/* Message i: kLen bytes at slot i of the send half, received into slot i of the other. */
constexpr size_t kLen = 256;
constexpr size_t kHalf = 1 << 19;
uint8_t *tx_slot(size_t i) { return g.buf.data() + i * kLen; }
uint8_t *rx_slot(size_t i) { return g.buf.data() + kHalf + i * kLen; }
void *ctx_of(size_t i) { return reinterpret_cast<void *>(uintptr_t(0x1000 + i)); }

/* Message i carries its index in its first 4 bytes. */
void fill_tx(size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t b = 0; b < kLen; b++)
			tx_slot(i)[b] = uint8_t(i * 31 + b * 7 + 1);
		const uint32_t idx = uint32_t(i);
		std::memcpy(tx_slot(i), &idx, sizeof idx);
	}
}

/* Reads whatever one CQ has (one entry at a time, checking each), recording contexts. */
size_t drain(fid_cq *cq, std::multiset<void *> &seen)
{
	size_t got = 0;
	for (;;) {
		fi_cq_data_entry e;
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == -FI_EAGAIN)
			return got;
		if (n == -FI_EAVAIL) {
			fi_cq_err_entry err{};
			fi_cq_readerr(cq, &err, 0);
			cr_assert_fail("error completion: %s (prov_errno %d)", fi_strerror(err.err), err.prov_errno);
		}
		cr_assert_eq(n, 1);
		seen.insert(e.op_context);
		got++;
	}
}

template <typename Done> void progress_until(Done done, const std::vector<fid_cq *> &cqs, std::multiset<void *> &seen,
					     const char *what)
{
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	while (!done()) {
		cr_assert(std::chrono::steady_clock::now() < end, "%s: no progress in 20 s", what);
		for (fid_cq *cq : cqs)
			drain(cq, seen);
	}
}

/* Every message arrived intact, each exactly once. SRD does not order: on efa-direct
 * message i may land in any posted buffer, so the index inside names it. */
void check_received(size_t n)
{
	std::vector<int> seen(n, 0);
	for (size_t i = 0; i < n; i++) {
		uint32_t idx;
		std::memcpy(&idx, rx_slot(i), sizeof idx);
		cr_assert_lt(idx, n, "buffer %zu holds no message (index %u)", i, idx);
		cr_assert_eq(std::memcmp(rx_slot(i), tx_slot(idx), kLen), 0, "message %u corrupt", idx);
		seen[idx]++;
	}
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(seen[i], 1, "message %zu arrived %d times", i, seen[i]);
}

void post_recvs(size_t ep, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(fi_recv(g.eps[ep].ep, rx_slot(i), kLen, g.desc, FI_ADDR_UNSPEC, ctx_of(10000 + i)), 0);
}

/*
 * A full send queue: sends are posted without any progress until -FI_EAGAIN; then
 * progress is driven and the rest posted as room appears; every message arrives intact
 * and every send completes exactly once.
 */
void full_send_queue()
{
	const size_t s = add_ep(1024), r = add_ep(1024);
	const fi_addr_t to = insert(r);
	const size_t n = 1000;
	fill_tx(n);
	post_recvs(r, n);
	size_t posted = 0;
	ssize_t ret = 0;
	while (posted < n && (ret = fi_send(g.eps[s].ep, tx_slot(posted), kLen, g.desc, to, ctx_of(posted))) == 0)
		posted++;
	cr_assert_eq(ret, -FI_EAGAIN, "the send queue never filled (%zu posted): %s", posted, fi_strerror(int(-ret)));
	cr_assert_lt(posted, n);
	cr_assert_gt(posted, 0u);
	std::multiset<void *> seen;
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	while (seen.size() < 2 * n) {
		cr_assert(std::chrono::steady_clock::now() < end, "stuck at %zu posted, %zu completions", posted, seen.size());
		drain(g.eps[s].cq, seen);
		drain(g.eps[r].cq, seen);
		while (posted < n) {
			ret = fi_send(g.eps[s].ep, tx_slot(posted), kLen, g.desc, to, ctx_of(posted));
			if (ret == -FI_EAGAIN)
				break;
			cr_assert_eq(ret, 0);
			posted++;
		}
	}
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(seen.count(ctx_of(i)), 1u, "send %zu completed %zu times", i, seen.count(ctx_of(i)));
		cr_assert_eq(seen.count(ctx_of(10000 + i)), 1u, "receive %zu", i);
	}
	check_received(n);
}

/*
 * A CQ of 4 entries that gets 64 completions before anyone reads it. Progress comes
 * from the send counter (reading a counter polls the CQs behind it), so the small CQ
 * is not read until the end. Either way nothing is lost: each operation takes its
 * device CQ slot at post time and returns it when its completion has been moved into
 * the CQ's own list, which holds completions beyond the size until they are read; a
 * post that finds no device CQ slot gets -FI_EAGAIN. Returns how many -FI_EAGAIN.
 */
size_t first_burst;

size_t small_cq()
{
	const size_t s = add_ep(4), r = add_ep(1024);
	const fi_addr_t to = insert(r);
	const size_t n = 64;
	fill_tx(n);
	post_recvs(r, n);
	std::multiset<void *> seen;
	size_t posted = 0, eagain = 0;
	/* First without any progress: how far posting gets. */
	ssize_t ret;
	while (posted < n && (ret = fi_send(g.eps[s].ep, tx_slot(posted), kLen, g.desc, to, ctx_of(posted))) == 0)
		posted++;
	if (posted < n) {
		cr_assert_eq(ret, -FI_EAGAIN);
		eagain++;
	}
	first_burst = posted;
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	while (fi_cntr_read(g.eps[s].cntr) < n) {
		cr_assert(std::chrono::steady_clock::now() < end, "stuck at %zu posted, %lu completed", posted,
			  (unsigned long)fi_cntr_read(g.eps[s].cntr));
		if (posted < n) {
			ret = fi_send(g.eps[s].ep, tx_slot(posted), kLen, g.desc, to, ctx_of(posted));
			if (ret == 0) {
				posted++;
				continue;
			}
			cr_assert_eq(ret, -FI_EAGAIN);
			eagain++;
		}
		drain(g.eps[r].cq, seen);
	}
	cr_assert_eq(fi_cntr_readerr(g.eps[s].cntr), 0u);
	progress_until([&] { return seen.size() >= n; }, {g.eps[r].cq}, seen, "receives");
	/* Now the small CQ: all 64 sends, each once. */
	cr_assert_eq(drain(g.eps[s].cq, seen), n, "the small CQ lost or duplicated completions");
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(seen.count(ctx_of(i)), 1u, "send %zu completed %zu times", i, seen.count(ctx_of(i)));
		cr_assert_eq(seen.count(ctx_of(10000 + i)), 1u, "receive %zu", i);
	}
	check_received(n);
	return eagain;
}

} // namespace

TestSuite(exhaust_efa, .fini = teardown, .timeout = 60);
TestSuite(exhaust_direct, .fini = teardown, .timeout = 60);

Test(exhaust_efa, full_send_queue)
{
	setenv("FI_EFA_TX_PKT_POOL_SIZE", "16", 1);
	open_world(true);
	full_send_queue();
}
Test(exhaust_direct, full_send_queue)
{
	open_world(false);
	g.info->tx_attr->size = 16;
	full_send_queue();
}

Test(exhaust_efa, small_cq_keeps_every_completion)
{
	open_world(true);
	const size_t eagain = small_cq();
	cr_log_info("efa, CQ of 4: 64 sends, %zu posted before the first -FI_EAGAIN, %zu -FI_EAGAIN in all",
		    first_burst, eagain);
	/* fi_efa(7): on the efa fabric the CQ size is a hint, completions are never lost
	 * (the CQ grows): the CQ of 4 held back no send. Its 64 completions were all there
	 * when it was read (small_cq() checked each). */
	cr_assert_eq(first_burst, 64u, "the efa fabric's CQ size is a hint: a CQ of 4 must not limit posting");
	cr_assert_eq(eagain, 0u, "no -FI_EAGAIN from a CQ of 4 on the efa fabric");
}
Test(exhaust_direct, small_cq_keeps_every_completion)
{
	open_world(false);
	const size_t eagain = small_cq();
	cr_log_info("efa-direct, CQ of 4: 64 sends, %zu posted before the first -FI_EAGAIN, %zu -FI_EAGAIN in all",
		    first_burst, eagain);
	/* The device CQ (at least 16 entries on the software device) bounds the operations in
	 * flight: posting stopped before 64. */
	cr_assert_lt(first_burst, 64u);
	cr_assert_gt(eagain, 0u);
}

/*
 * A receiver that posts no receive and does not progress: on the efa fabric
 * (FI_RM_ENABLED) the sender's packets meet RNR once the receiver's few receive buffers
 * are full; the sender queues them and retries with backoff, meanwhile serves another
 * peer, and everything completes once the receiver posts and progresses.
 */
Test(exhaust_efa, receiver_that_never_posts)
{
	setenv("FI_EFA_RX_PKT_POOL_SIZE", "8", 1);
	open_world(true);
	const size_t s = add_ep(1024), r = add_ep(1024), other = add_ep(1024);
	const fi_addr_t to_r = insert(r), to_other = insert(other);
	const size_t n = 32;
	fill_tx(n);
	std::multiset<void *> seen;
	size_t posted = 0;
	/* Post all n; the sender progresses, the receiver does nothing. */
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	while (posted < n) {
		cr_assert(std::chrono::steady_clock::now() < end, "stuck at %zu posted", posted);
		ssize_t ret = fi_send(g.eps[s].ep, tx_slot(posted), kLen, g.desc, to_r, ctx_of(posted));
		if (ret == 0)
			posted++;
		else
			cr_assert_eq(ret, -FI_EAGAIN);
		drain(g.eps[s].cq, seen);
	}
	/* The receiver holds at most its 8 receive buffers: the rest cannot have been
	 * delivered, so some sends are still pending however long the sender progresses. */
	for (int i = 0; i < 1000; i++)
		drain(g.eps[s].cq, seen);
	cr_assert_lt(seen.size(), n, "all %zu sends completed without a receiver", n);

	/* The sender still talks to another peer. */
	std::vector<uint8_t> obuf(kLen);
	fid_mr *omr = nullptr;
	cr_assert_eq(fi_mr_reg(g.dom, obuf.data(), obuf.size(), FI_RECV, 0, next_key++, 0, &omr, nullptr), 0);
	cr_assert_eq(fi_recv(g.eps[other].ep, obuf.data(), kLen, fi_mr_desc(omr), FI_ADDR_UNSPEC, ctx_of(20000)), 0);
	ssize_t ret;
	while ((ret = fi_send(g.eps[s].ep, tx_slot(n - 1), kLen, g.desc, to_other, ctx_of(30000))) == -FI_EAGAIN)
		drain(g.eps[s].cq, seen);
	cr_assert_eq(ret, 0);
	progress_until([&] { return seen.count(ctx_of(20000)) && seen.count(ctx_of(30000)); },
		       {g.eps[s].cq, g.eps[other].cq}, seen, "the other peer");
	cr_assert_eq(std::memcmp(obuf.data(), tx_slot(n - 1), kLen), 0);
	cr_assert_eq(fi_close(&omr->fid), 0);

	/* Now the receiver posts and progresses: everything completes, intact. */
	post_recvs(r, n);
	progress_until([&] { return seen.count(ctx_of(10000 + n - 1)) && seen.count(ctx_of(n - 1)); },
		       {g.eps[s].cq, g.eps[r].cq}, seen, "after the receives");
	progress_until([&] { return seen.size() >= 2 * n + 2; }, {g.eps[s].cq, g.eps[r].cq}, seen, "all");
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(seen.count(ctx_of(i)), 1u, "send %zu", i);
		cr_assert_eq(seen.count(ctx_of(10000 + i)), 1u, "receive %zu", i);
	}
	check_received(n);
}

/*
 * efa-direct, a receiver without a receive: with FI_OPT_EFA_RNR_RETRY 0 the send fails
 * with FI_ENORX (REMOTE_ERROR_RNR, prov_errno 10, fi_efa(7) ERRORS); once the receiver
 * posts, the same send succeeds.
 */
static void no_rnr_retry(fid_ep *ep)
{
	size_t retry = 0;
	cr_assert_eq(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry, sizeof retry), 0);
}

Test(exhaust_direct, receiver_that_never_posts_gets_rnr)
{
	open_world(false);
	const size_t s = add_ep(64, no_rnr_retry), r = add_ep(64);
	const fi_addr_t to = insert(r);
	fill_tx(1);
	cr_assert_eq(fi_send(g.eps[s].ep, tx_slot(0), kLen, g.desc, to, ctx_of(0)), 0);
	fi_cq_data_entry e;
	ssize_t n;
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	while ((n = fi_cq_read(g.eps[s].cq, &e, 1)) == -FI_EAGAIN)
		cr_assert(std::chrono::steady_clock::now() < end, "no RNR error");
	cr_assert_eq(n, -FI_EAVAIL, "the send completed without a receive");
	fi_cq_err_entry err{};
	cr_assert_eq(fi_cq_readerr(g.eps[s].cq, &err, 0), 1);
	cr_assert_eq(err.err, FI_ENORX, "err %d (%s)", err.err, fi_strerror(err.err));
	cr_assert_eq(err.prov_errno, 10);
	cr_assert_eq(err.op_context, ctx_of(0));

	post_recvs(r, 1);
	cr_assert_eq(fi_send(g.eps[s].ep, tx_slot(0), kLen, g.desc, to, ctx_of(1)), 0);
	std::multiset<void *> seen;
	progress_until([&] { return seen.count(ctx_of(1)) && seen.count(ctx_of(10000)); }, {g.eps[s].cq, g.eps[r].cq},
		       seen, "after the receive");
	check_received(1);
}

/*
 * Registration beyond the device's limit (EFASIM_MAX_MR): -FI_ENOMEM with a log line
 * that names the limit; after closing two MRs, two registrations succeed again.
 */
static void mr_limit(bool rdm)
{
	setenv("EFASIM_MAX_MR", "48", 1);
	open_world(rdm, 0);
	add_ep(64); /* the provider's own registrations count too */
	std::vector<uint8_t> mem(4096 * 64);
	std::vector<fid_mr *> mrs;
	int ret = 0;
	fflush(stderr);
	FILE *log = tmpfile();
	const int saved = dup(2);
	dup2(fileno(log), 2);
	for (size_t i = 0; i < 64; i++) {
		fid_mr *m = nullptr;
		ret = fi_mr_reg(g.dom, mem.data() + 4096 * i, 4096, FI_SEND | FI_RECV, 0, next_key++, 0, &m, nullptr);
		if (ret)
			break;
		mrs.push_back(m);
	}
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	std::string text;
	rewind(log);
	for (int ch; (ch = fgetc(log)) != EOF;)
		text += char(ch);
	fclose(log);
	cr_assert_eq(ret, -FI_ENOMEM, "after %zu registrations: %d (%s)", mrs.size(), ret, fi_strerror(-ret));
	cr_assert_gt(mrs.size(), 0u);
	cr_assert_lt(mrs.size(), 48u);
	cr_assert(text.find("max_mr") != std::string::npos && text.find("close MRs") != std::string::npos,
		  "no log line saying what to do: '%s'", text.c_str());
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(fi_close(&mrs.back()->fid), 0);
		mrs.pop_back();
	}
	for (int k = 0; k < 2; k++) {
		fid_mr *m = nullptr;
		cr_assert_eq(fi_mr_reg(g.dom, mem.data() + 4096 * (60 + k), 4096, FI_SEND, 0, next_key++, 0, &m, nullptr), 0,
			     "registration after closing MRs");
		mrs.push_back(m);
	}
	fid_mr *m = nullptr;
	cr_assert_eq(fi_mr_reg(g.dom, mem.data(), 4096, FI_SEND, 0, next_key++, 0, &m, nullptr), -FI_ENOMEM, "the limit again");
	for (fid_mr *x : mrs)
		cr_assert_eq(fi_close(&x->fid), 0);
}

Test(exhaust_efa, mr_registration_beyond_the_limit) { mr_limit(true); }
Test(exhaust_direct, mr_registration_beyond_the_limit) { mr_limit(false); }
