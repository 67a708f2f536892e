/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Peer failure and fi_av_remove on the efa fabric (rdm/liveness.cpp), in one process
 * through the public API on the software device: two endpoints S and A on one AV; A
 * never reads its CQ (FI_PROGRESS_MANUAL), so S's long-CTS send (waits for a CTS) and
 * delivery-complete send (waits for a RECEIPT) can only end by what is tested:
 *
 *   - fi_av_remove of A: both complete with FI_ECANCELED at S's next CQ read, a send to
 *     the removed fi_addr is -FI_EINVAL, and a message A sends afterwards arrives as
 *     from an unknown sender (FI_ADDR_NOTAVAIL), with fresh state (message id 0);
 *   - A's endpoint replaced on its QP number by A' (new_endpoint_on_the_qpn_...): A''s
 *     first packet fails them at once, and A' is a new peer;
 *   - A's endpoint closed: both fail with FI_EHOSTUNREACH within the probe interval x
 *     5/4 + EFASIM_TIMEOUT_MS (+ 3 s), and a new send to A fails at once with
 *     -FI_EHOSTUNREACH; after fi_av_remove, -FI_EINVAL;
 *   - FI_DELIVERY_COMPLETE sends of every protocol complete once, and A's death later
 *     fails only what still waits on it (delivery_complete_sends_complete_once).
 * Criterion runs each test in a process of its own: the parameters are read once.
 */
#include "fitest.h"
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <criterion/criterion.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Env {
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	fid_domain *dom = nullptr;
	fid_av *av = nullptr;
};
Env g;

struct Ep {
	fid_ep *ep = nullptr;
	fid_cq *cq = nullptr;
	uint8_t addr[32] = {};
};

void open_env()
{
	g.info = fitest::getinfo("efa", FI_TAGGED | FI_SEND | FI_RECV | FI_SOURCE,
				 fitest::kMrMode & ~uint64_t(FI_MR_LOCAL));
	fitest::open_fabric(g.info, &g.fab, &g.dom);
	fi_av_attr attr{};
	attr.type = FI_AV_TABLE;
	cr_assert_eq(fi_av_open(g.dom, &attr, &g.av, nullptr), 0);
}

Ep open_ep()
{
	Ep e;
	cr_assert_eq(fi_endpoint(g.dom, g.info, &e.ep, nullptr), 0);
	fi_cq_attr attr{};
	attr.format = FI_CQ_FORMAT_TAGGED;
	attr.size = 64;
	cr_assert_eq(fi_cq_open(g.dom, &attr, &e.cq, nullptr), 0);
	cr_assert_eq(fi_ep_bind(e.ep, &e.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(e.ep, &g.av->fid, 0), 0);
	cr_assert_eq(fi_enable(e.ep), 0);
	size_t len = sizeof e.addr;
	cr_assert_eq(fi_getname(&e.ep->fid, e.addr, &len), 0);
	return e;
}

void close_ep(Ep &e)
{
	if (e.ep)
		cr_assert_eq(fi_close(&e.ep->fid), 0);
	cr_assert_eq(fi_close(&e.cq->fid), 0);
	e.ep = nullptr;
}

void close_env()
{
	fi_close(&g.av->fid);
	fi_close(&g.dom->fid);
	fi_close(&g.fab->fid);
	fi_freeinfo(g.info);
	g = Env{};
}

/* One completion of `cq`, successful or not; fails after `ms`. */
fi_cq_err_entry next(fid_cq *cq, int ms, bool *error)
{
	const auto end = Clock::now() + std::chrono::milliseconds(ms);
	for (;;) {
		fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == 1) {
			*error = false;
			fi_cq_err_entry out{};
			out.op_context = e.op_context;
			out.len = e.len;
			return out;
		}
		if (n == -FI_EAVAIL) {
			fi_cq_err_entry err{};
			cr_assert_eq(fi_cq_readerr(cq, &err, 0), 1);
			*error = true;
			return err;
		}
		cr_assert_eq(n, -FI_EAGAIN, "fi_cq_read: %s", fi_strerror(int(-n)));
		cr_assert(Clock::now() < end, "no completion within %d ms", ms);
	}
}

/* Reads `cq` `times` times: nothing may complete. */
void expect_nothing(fid_cq *cq, int times, const char *what)
{
	for (int i = 0; i < times; i++) {
		fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(cq, &e, 1);
		cr_assert_eq(n, -FI_EAGAIN, "%s: fi_cq_read gave %zd", what, n);
	}
}

/* S's two sends that wait for A's answer: 256 KiB (long-CTS: a CTS) and 100 bytes with
 * FI_DELIVERY_COMPLETE (a RECEIPT). */
void post_waiting(const Ep &s, fi_addr_t a, std::vector<uint8_t> &buf, fi_context2 *ctx)
{
	cr_assert_eq(fi_tsend(s.ep, buf.data(), 256 << 10, nullptr, a, 1, &ctx[0]), 0);
	iovec iov{buf.data(), 100};
	fi_msg_tagged m{};
	m.msg_iov = &iov;
	m.iov_count = 1;
	m.addr = a;
	m.tag = 2;
	m.context = &ctx[1];
	cr_assert_eq(fi_tsendmsg(s.ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION), 0);
	expect_nothing(s.cq, 1000, "S's sends to a peer that does not progress");
}

} // namespace

Test(rdm_peer, av_remove_cancels_and_forgets)
{
	open_env();
	Ep s = open_ep(), a = open_ep();
	fi_addr_t fa[2];
	cr_assert_eq(fi_av_insert(g.av, s.addr, 1, &fa[0], 0, nullptr), 1);
	cr_assert_eq(fi_av_insert(g.av, a.addr, 1, &fa[1], 0, nullptr), 1);
	std::vector<uint8_t> buf(1 << 20, 0x5a);
	fi_context2 ctx[4]{};
	post_waiting(s, fa[1], buf, ctx);

	cr_assert_eq(fi_av_remove(g.av, &fa[1], 1, 0), 0);
	bool seen[2] = {false, false};
	for (int i = 0; i < 2; i++) {
		bool error = false;
		fi_cq_err_entry e = next(s.cq, 2000, &error);
		cr_assert(error, "a send to the removed peer completed without error");
		cr_assert_eq(e.err, FI_ECANCELED, "err %d (%s), expected FI_ECANCELED", e.err, fi_strerror(e.err));
		cr_assert_eq(e.prov_errno, 4161, "prov_errno %d, expected PEER_REMOVED", e.prov_errno);
		const int k = e.op_context == &ctx[0] ? 0 : e.op_context == &ctx[1] ? 1 : -1;
		cr_assert(k >= 0 && !seen[k], "an error entry of no pending send");
		seen[k] = true;
	}
	cr_assert_eq(fi_tsend(s.ep, buf.data(), 8, nullptr, fa[1], 3, &ctx[2]), -FI_EINVAL);

	/* A (which still knows S) sends: S takes it as from an unknown sender, with fresh
	 * state (message id 0 is A's first to S), never as from the removed fi_addr. */
	std::vector<uint8_t> rx(4096);
	cr_assert_eq(fi_trecv(s.ep, rx.data(), rx.size(), nullptr, FI_ADDR_UNSPEC, 0, ~0ull, &ctx[3]), 0);
	cr_assert_eq(fi_tsend(a.ep, buf.data(), 64, nullptr, fa[0], 4, &ctx[2]), 0);
	const auto end = Clock::now() + std::chrono::seconds(5);
	for (;;) {
		fi_cq_tagged_entry e;
		fi_cq_read(a.cq, &e, 1); /* A's progress; its entries do not matter */
		fi_addr_t src = 0;
		ssize_t n = fi_cq_readfrom(s.cq, &e, 1, &src);
		if (n == 1) {
			cr_assert_eq(e.op_context, &ctx[3]);
			cr_assert_eq(e.len, 64u);
			cr_assert_eq(rx[0], 0x5a);
			cr_assert_eq(rx[63], 0x5a);
			cr_assert_eq(src, FI_ADDR_NOTAVAIL, "the source is fi_addr %lu, expected FI_ADDR_NOTAVAIL",
				     (unsigned long)src);
			break;
		}
		cr_assert_eq(n, -FI_EAGAIN, "S: fi_cq_readfrom: %s", fi_strerror(int(-n)));
		cr_assert(Clock::now() < end, "A's message after the removal never reached S");
	}
	close_ep(s);
	close_ep(a);
	close_env();
}

Test(rdm_peer, dead_peer_fails_waiting_ops_within_bound)
{
	setenv("FI_EFA_PEER_PROBE_INTERVAL", "50", 1);
	setenv("EFASIM_TIMEOUT_MS", "300", 1);
	open_env();
	Ep s = open_ep(), a = open_ep();
	fi_addr_t fa[2];
	cr_assert_eq(fi_av_insert(g.av, s.addr, 1, &fa[0], 0, nullptr), 1);
	cr_assert_eq(fi_av_insert(g.av, a.addr, 1, &fa[1], 0, nullptr), 1);
	std::vector<uint8_t> buf(1 << 20, 0x5a);
	fi_context2 ctx[3]{};
	post_waiting(s, fa[1], buf, ctx);

	cr_assert_eq(fi_close(&a.ep->fid), 0); /* A is gone */
	a.ep = nullptr;
	const auto t0 = Clock::now();
	/* The probe interval x 5/4 plus the device timeout (about 360 ms here), plus 3 s for
	 * a loaded machine: CI once measured 1381 ms on 2 busy cores, against 298-364 ms
	 * unloaded and with 3 CPU hogs. Without detection the sends would wait forever:
	 * nothing of theirs is on the device (next() gives up after 10 s). */
	const long bound = 50 + 50 / 4 + 300 + 3000;
	for (int i = 0; i < 2; i++) {
		bool error = false;
		fi_cq_err_entry e = next(s.cq, 10000, &error);
		cr_assert(error, "a send to the dead peer completed without error");
		cr_assert_eq(e.err, FI_EHOSTUNREACH, "err %d (%s), expected FI_EHOSTUNREACH", e.err,
			     fi_strerror(e.err));
		cr_assert(e.op_context == &ctx[0] || e.op_context == &ctx[1]);
	}
	const long ms =
		long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
	cr_assert_leq(ms, bound, "the sends failed after %ld ms, beyond the %ld ms bound", ms, bound);
	cr_log_info("the sends to the closed endpoint failed after %ld ms (bound %ld ms)", ms, bound);
	cr_assert_eq(fi_tsend(s.ep, buf.data(), 8, nullptr, fa[1], 3, &ctx[2]), -FI_EHOSTUNREACH,
		     "a new send to the dead peer fails at once");
	cr_assert_eq(fi_av_remove(g.av, &fa[1], 1, 0), 0);
	cr_assert_eq(fi_tsend(s.ep, buf.data(), 8, nullptr, fa[1], 3, &ctx[2]), -FI_EINVAL);
	close_ep(s);
	close_ep(a);
	close_env();
}

/* A new endpoint A' on A's QP number (EFASIM_MAX_QP=2: S and A take both) sends to S
 * while S still has A, with operations waiting on it, in its AV: A' is a new peer, its
 * message arrives (fresh state, unknown sender), and A's waiting operations fail at once
 * (FI_EHOSTUNREACH): the device timeout (60 s) and probes (off) play no part. */
Test(rdm_peer, new_endpoint_on_the_qpn_replaces_the_old)
{
	setenv("EFASIM_MAX_QP", "2", 1);
	/* An address of its own: with two QP numbers, a test running beside it on the
	 * default address could hold one (create_qp: ENOSPC). */
	setenv("EFASIM_ADDR", "127.0.0.93", 1);
	setenv("EFASIM_TIMEOUT_MS", "60000", 1);
	setenv("FI_EFA_PEER_PROBE_INTERVAL", "0", 1);
	open_env();
	Ep s = open_ep(), a = open_ep();
	fi_addr_t fa[2];
	cr_assert_eq(fi_av_insert(g.av, s.addr, 1, &fa[0], 0, nullptr), 1);
	cr_assert_eq(fi_av_insert(g.av, a.addr, 1, &fa[1], 0, nullptr), 1);
	std::vector<uint8_t> buf(1 << 20, 0x5a);
	fi_context2 ctx[4]{};
	post_waiting(s, fa[1], buf, ctx);
	close_ep(a);
	Ep a2 = open_ep();
	cr_assert_eq(memcmp(a2.addr, a.addr, 18), 0, "A' has A's GID and QP number");
	cr_assert_neq(memcmp(a2.addr + 20, a.addr + 20, 4), 0, "A' has another QKEY");

	std::vector<uint8_t> rx(4096);
	cr_assert_eq(fi_trecv(s.ep, rx.data(), rx.size(), nullptr, FI_ADDR_UNSPEC, 0, ~0ull, &ctx[3]), 0);
	cr_assert_eq(fi_tsend(a2.ep, buf.data(), 64, nullptr, fa[0], 4, &ctx[2]), 0);
	const auto end = Clock::now() + std::chrono::seconds(5);
	int failed = 0;
	bool got = false;
	while (failed < 2 || !got) {
		cr_assert(Clock::now() < end, "after A' spoke: %d of 2 sends to A failed, message %s", failed,
			  got ? "received" : "not received");
		fi_cq_tagged_entry e;
		fi_cq_read(a2.cq, &e, 1);
		fi_addr_t src = 0;
		ssize_t n = fi_cq_readfrom(s.cq, &e, 1, &src);
		if (n == 1) {
			cr_assert_eq(e.op_context, &ctx[3], "a completion of S other than its receive");
			cr_assert_eq(e.len, 64u);
			cr_assert_eq(src, FI_ADDR_NOTAVAIL, "A's message came from fi_addr %lu", (unsigned long)src);
			got = true;
		} else if (n == -FI_EAVAIL) {
			fi_cq_err_entry err{};
			cr_assert_eq(fi_cq_readerr(s.cq, &err, 0), 1);
			cr_assert(err.op_context == &ctx[0] || err.op_context == &ctx[1]);
			cr_assert_eq(err.err, FI_EHOSTUNREACH, "err %d (%s)", err.err, fi_strerror(err.err));
			cr_assert_eq(err.prov_errno, 4162, "prov_errno %d, expected PEER_REPLACED", err.prov_errno);
			failed++;
		} else {
			cr_assert_eq(n, -FI_EAGAIN);
		}
	}
	cr_assert_eq(fi_tsend(s.ep, buf.data(), 8, nullptr, fa[1], 3, &ctx[2]), -FI_EHOSTUNREACH);
	close_ep(s);
	close_ep(a2);
	close_env();
}

namespace {

/* Drives S and A until ctx's completion at S (counted in done[]) and A's receive. */
void complete_pair(const Ep &s, const Ep &a, fi_context2 *sctx, fi_context2 *actx, std::map<void *, int> &done,
		   const char *what)
{
	const auto end = Clock::now() + std::chrono::seconds(10);
	bool sent = false, received = false;
	while (!sent || !received) {
		cr_assert(Clock::now() < end, "%s: send %s, receive %s", what, sent ? "done" : "pending",
			  received ? "done" : "pending");
		fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(s.cq, &e, 1);
		if (n == 1) {
			done[e.op_context]++;
			sent = sent || e.op_context == sctx;
		} else {
			cr_assert_eq(n, -FI_EAGAIN, "%s: S's CQ: %zd (an error entry?)", what, n);
		}
		n = fi_cq_read(a.cq, &e, 1);
		if (n == 1) {
			cr_assert_eq(e.op_context, actx, "%s: A completed something else", what);
			received = true;
		} else {
			cr_assert_eq(n, -FI_EAGAIN, "%s: A's CQ: %zd", what, n);
		}
	}
}

} // namespace

/*
 * FI_DELIVERY_COMPLETE sends of every protocol (eager, medium, long-CTS, long-read, and
 * long-read falling back to long-CTS because the sender cannot register its buffer)
 * complete once each; afterwards the peer dies and nothing completes again: no
 * operation is left waiting on it (it is not probed as busy) and none is completed a
 * second time by its failure.
 */
Test(rdm_peer, delivery_complete_sends_complete_once)
{
	setenv("FI_EFA_PEER_PROBE_INTERVAL", "50", 1);
	setenv("EFASIM_TIMEOUT_MS", "300", 1);
	setenv("EFASIM_MAX_MR", "128", 1);
	open_env();
	Ep s = open_ep(), a = open_ep();
	fi_addr_t fa[2];
	cr_assert_eq(fi_av_insert(g.av, s.addr, 1, &fa[0], 0, nullptr), 1);
	cr_assert_eq(fi_av_insert(g.av, a.addr, 1, &fa[1], 0, nullptr), 1);
	std::vector<uint8_t> buf(2 << 20), rx(2 << 20);
	for (size_t i = 0; i < buf.size(); i++)
		buf[i] = uint8_t(i * 7 + 1);
	std::map<void *, int> done;
	fi_context2 sctx[8]{}, actx[8]{};

	/* A first message each way: S learns A's features (long-read needs them). */
	cr_assert_eq(fi_trecv(a.ep, rx.data(), rx.size(), nullptr, FI_ADDR_UNSPEC, 0, ~0ull, &actx[0]), 0);
	cr_assert_eq(fi_tsend(s.ep, buf.data(), 8, nullptr, fa[1], 0, &sctx[0]), 0);
	complete_pair(s, a, &sctx[0], &actx[0], done, "first message");
	cr_assert_eq(fi_trecv(s.ep, rx.data(), 64, nullptr, FI_ADDR_UNSPEC, 0, ~0ull, &actx[1]), 0);
	cr_assert_eq(fi_tsend(a.ep, buf.data(), 8, nullptr, fa[0], 0, &sctx[1]), 0);
	for (bool r = false, t = false; !r || !t;) {
		fi_cq_tagged_entry e;
		if (fi_cq_read(s.cq, &e, 1) == 1) {
			cr_assert_eq(e.op_context, &actx[1]);
			r = true;
		}
		if (fi_cq_read(a.cq, &e, 1) == 1) {
			cr_assert_eq(e.op_context, &sctx[1]);
			t = true;
		}
	}

	struct Case {
		const char *name;
		size_t len;
		bool no_mr; /* the sender's device has no MR left: long-read falls back */
	} cases[] = {{"eager", 100, false},
		     {"medium", 20000, false},
		     {"long-CTS", 256 << 10, false},
		     {"long-read", 2 << 20, false},
		     {"long-read falling back to long-CTS", 2 << 20, true}};
	int k = 2;
	for (const Case &c : cases) {
		memset(rx.data(), 0, rx.size());
		cr_assert_eq(fi_trecv(a.ep, rx.data(), rx.size(), nullptr, FI_ADDR_UNSPEC, 0, ~0ull, &actx[k]), 0);
		std::vector<fid_mr *> hog;
		static uint8_t page[64];
		if (c.no_mr)
			for (fid_mr *mr = nullptr; fi_mr_reg(g.dom, page, sizeof page, FI_SEND, 0, 0, 0, &mr, nullptr) == 0;)
				hog.push_back(mr);
		iovec iov{buf.data(), c.len};
		fi_msg_tagged m{};
		m.msg_iov = &iov;
		m.iov_count = 1;
		m.addr = fa[1];
		m.tag = 5;
		m.context = &sctx[k];
		cr_assert_eq(fi_tsendmsg(s.ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION), 0, "%s", c.name);
		if (c.no_mr)
			cr_assert_gt(hog.size(), 0u, "no MR was left to take");
		for (fid_mr *mr : hog)
			cr_assert_eq(fi_close(&mr->fid), 0);
		complete_pair(s, a, &sctx[k], &actx[k], done, c.name);
		cr_assert_eq(memcmp(rx.data(), buf.data(), c.len), 0, "%s: the data", c.name);
		k++;
	}
	for (int i = 0; i < k; i++)
		if (i != 1)
			cr_assert_eq(done[&sctx[i]], 1, "send %d completed %d times", i, done[&sctx[i]]);

	/* One more send, which waits for A's CTS; then A dies. That send fails, once, and
	 * nothing else: no completed send is still tracked and completed again. */
	cr_assert_eq(fi_tsend(s.ep, buf.data(), 256 << 10, nullptr, fa[1], 9, &sctx[7]), 0);
	close_ep(a);
	const auto end = Clock::now() + std::chrono::milliseconds(2 * (50 + 50 / 4 + 300 + 1000));
	int failures = 0;
	while (Clock::now() < end) {
		fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(s.cq, &e, 1);
		if (n == -FI_EAVAIL) {
			fi_cq_err_entry err{};
			cr_assert_eq(fi_cq_readerr(s.cq, &err, 0), 1);
			const long idx = long(static_cast<fi_context2 *>(err.op_context) - sctx);
			cr_assert_eq(err.op_context, &sctx[7],
				     "after the peer died: an error completion (%s) of send %ld, which completed already",
				     fi_strerror(err.err), idx);
			cr_assert_eq(err.err, FI_EHOSTUNREACH);
			failures++;
			continue;
		}
		cr_assert_eq(n, -FI_EAGAIN, "after the peer died: a completion (%zd)", n);
	}
	cr_assert_eq(failures, 1, "the waiting send failed %d times", failures);
	close_ep(s);
	close_env();
}
