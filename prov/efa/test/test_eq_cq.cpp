/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Event queues and completion queues through the public API (objtest.h): EQ events in
 * order with peek and timeout, CQ sreadfrom's source address and timeout, sread without
 * a wait object.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_rma.h>

#include <criterion/criterion.h>

#include "objtest.h"

#include <chrono>
#include <thread>
#include <vector>

using namespace objtest;

TestSuite(objects, .init = setup, .fini = teardown, .timeout = 60);

/* ------------------------------------------------------------------ EQ */

Test(objects, eq_events_in_order_with_peek_and_timeout)
{
	fid_eq *eq = open_eq();
	fi_eq_entry in[3];
	for (int i = 0; i < 3; i++) {
		in[i] = fi_eq_entry{nullptr, reinterpret_cast<void *>(uintptr_t(0x100 + i)), uint64_t(i)};
		cr_assert_eq(fi_eq_write(eq, FI_NOTIFY, &in[i], sizeof in[i], 0), ssize_t(sizeof in[i]));
	}
	fi_eq_entry out;
	uint32_t event = 0;
	cr_assert_eq(fi_eq_read(eq, &event, &out, sizeof out, FI_PEEK), ssize_t(sizeof out));
	cr_assert_eq(out.data, 0u, "peek sees the first");
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(fi_eq_read(eq, &event, &out, sizeof out, 0), ssize_t(sizeof out));
		cr_assert_eq(event, uint32_t(FI_NOTIFY));
		cr_assert_eq(out.data, uint64_t(i));
		cr_assert_eq(out.context, in[i].context);
	}
	cr_assert_eq(fi_eq_read(eq, &event, &out, sizeof out, 0), -FI_EAGAIN);
	fi_eq_err_entry err{};
	cr_assert_eq(fi_eq_readerr(eq, &err, 0), -FI_EAGAIN);

	/* A timed sread on an empty EQ returns after the timeout, not before. */
	auto t0 = std::chrono::steady_clock::now();
	cr_assert_eq(fi_eq_sread(eq, &event, &out, sizeof out, 50, 0), -FI_EAGAIN);
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
	cr_assert_geq(ms.count(), 49);

	/* An infinite sread returns the event another thread writes. */
	std::thread writer([&] { fi_eq_write(eq, FI_NOTIFY, &in[2], sizeof in[2], 0); });
	cr_assert_eq(fi_eq_sread(eq, &event, &out, sizeof out, -1, 0), ssize_t(sizeof out));
	writer.join();
	cr_assert_eq(out.data, 2u);

	/* A buffer too small for the event. */
	cr_assert_eq(fi_eq_write(eq, FI_NOTIFY, &in[0], sizeof in[0], 0), ssize_t(sizeof in[0]));
	cr_assert_eq(fi_eq_read(eq, &event, &out, 4, 0), -FI_ETOOSMALL);
	cr_assert_eq(fi_close(&eq->fid), 0);
}

/* ------------------------------------------------------------------ CQ */

Test(objects, cq_sreadfrom_gives_the_source_and_honours_the_timeout)
{
	fid_av *av = open_av(FI_AV_TABLE);
	Ep a = open_ep(av, FI_WAIT_UNSPEC), b = open_ep(av, FI_WAIT_UNSPEC);
	fi_addr_t fa[2];
	cr_assert_eq(fi_av_insert(av, a.addr, 1, &fa[0], 0, nullptr), 1);
	cr_assert_eq(fi_av_insert(av, b.addr, 1, &fa[1], 0, nullptr), 1);

	fi_cq_data_entry e[2];
	fi_addr_t src = 0;
	auto t0 = std::chrono::steady_clock::now();
	cr_assert_eq(fi_cq_sreadfrom(b.cq, e, 2, &src, nullptr, 50), -FI_EAGAIN);
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
	cr_assert_geq(ms.count(), 49);

	std::vector<char> rbuf(256, 0), sbuf(256);
	for (size_t i = 0; i < sbuf.size(); i++)
		sbuf[i] = char(i * 7 + 1);
	fid_mr *rmr = nullptr, *smr = nullptr;
	cr_assert_eq(fi_mr_reg(g.dom, rbuf.data(), rbuf.size(), FI_RECV, 0, 0, 0, &rmr, nullptr), 0);
	cr_assert_eq(fi_mr_reg(g.dom, sbuf.data(), sbuf.size(), FI_SEND, 0, 0, 0, &smr, nullptr), 0);
	int rctx = 0, sctx = 0;
	cr_assert_eq(fi_recv(b.ep, rbuf.data(), rbuf.size(), fi_mr_desc(rmr), FI_ADDR_UNSPEC, &rctx), 0);
	cr_assert_eq(fi_senddata(a.ep, sbuf.data(), sbuf.size(), fi_mr_desc(smr), 0xabcd, fa[1], &sctx), 0);

	cr_assert_eq(fi_cq_sreadfrom(b.cq, e, 2, &src, nullptr, 5000), 1);
	cr_assert_eq(e[0].op_context, &rctx);
	cr_assert(e[0].flags & FI_RECV);
	cr_assert(e[0].flags & FI_REMOTE_CQ_DATA);
	cr_assert_eq(e[0].data, 0xabcdu);
	cr_assert_eq(e[0].len, sbuf.size());
	cr_assert_eq(src, fa[0], "FI_SOURCE: the sender's fi_addr");
	cr_assert_eq(std::memcmp(rbuf.data(), sbuf.data(), sbuf.size()), 0);
	cr_assert_eq(fi_cq_sread(a.cq, e, 2, nullptr, 5000), 1);
	cr_assert_eq(e[0].op_context, &sctx);
	cr_assert(e[0].flags & FI_SEND);

	int fd = -1;
	cr_assert_eq(fi_control(&b.cq->fid, FI_GETWAIT, &fd), 0);
	cr_assert_geq(fd, 0);

	cr_assert_eq(fi_close(&rmr->fid), 0);
	cr_assert_eq(fi_close(&smr->fid), 0);
	close_ep(a);
	close_ep(b);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(objects, cq_without_wait_object_refuses_sread)
{
	fid_cq *cq = open_cq(FI_WAIT_NONE);
	fi_cq_data_entry e;
	cr_assert_eq(fi_cq_sread(cq, &e, 1, nullptr, 10), -FI_EINVAL);
	int fd = -1;
	cr_assert_neq(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
	cr_assert_eq(fi_close(&cq->fid), 0);
}

