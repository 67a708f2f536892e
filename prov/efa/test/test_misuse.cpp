/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * API misuse through the public libfabric API: a table of bad calls, one row each, with
 * the -FI_E* a libfabric user expects (fi_endpoint(3), fi_msg(3), fi_rma(3), fi_tagged(3),
 * fi_atomic(3), fi_mr(3), fi_av(3), fi_cq(3)) and the provider's log line that tells the
 * user what to do. Each row is its own Criterion test, run on the efa fabric
 * (misuse_efa), on efa-direct (misuse_direct) or on both.
 *
 * test_objects.cpp covers the object model's other errors (closed objects, wrong class
 * for fi_av_bind, options, a removed fi_addr); this file does not repeat them.
 */
#include "fitest.h"
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <criterion/criterion.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kBuf = 4096;

/* One fabric's objects: two enabled endpoints that know each other, an endpoint that
 * is opened but not enabled, and a buffer registered for everything. */
struct World {
	bool rdm = false;
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	fid_domain *dom = nullptr;
	fid_av *av = nullptr;
	fid_cq *cq = nullptr;
	fid_ep *ep = nullptr;	/* enabled */
	fid_ep *peer = nullptr; /* enabled, in the AV as `to` */
	fid_ep *raw = nullptr;	/* opened, nothing bound, not enabled */
	fi_addr_t to = FI_ADDR_NOTAVAIL;
	std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf, 0x5a);
	fid_mr *mr = nullptr;
	void *desc = nullptr;
	uint64_t key = 0;
	uint64_t addr() const { return uint64_t(reinterpret_cast<uintptr_t>(buf.data())); }
};

World g;

fi_info *get_info(bool rdm)
{
	fitest::use_provider(true); /* what a user sees: every row checks it */
	return fitest::getinfo(rdm ? "efa" : "efa-direct", FI_MSG | FI_RMA | (rdm ? FI_TAGGED | FI_ATOMIC : 0));
}

fid_ep *open_enabled(uint8_t *name)
{
	fid_ep *ep = nullptr;
	cr_assert_eq(fi_endpoint(g.dom, g.info, &ep, nullptr), 0);
	cr_assert_eq(fi_ep_bind(ep, &g.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(ep, &g.av->fid, 0), 0);
	cr_assert_eq(fi_enable(ep), 0);
	size_t len = 32;
	cr_assert_eq(fi_getname(&ep->fid, name, &len), 0);
	return ep;
}

void setup(bool rdm)
{
	g.rdm = rdm;
	g.info = get_info(rdm);
	fitest::open_fabric(g.info, &g.fab, &g.dom);
	fi_av_attr aa{};
	aa.type = FI_AV_TABLE;
	cr_assert_eq(fi_av_open(g.dom, &aa, &g.av, nullptr), 0);
	fi_cq_attr ca{};
	ca.format = FI_CQ_FORMAT_DATA;
	ca.size = 64;
	cr_assert_eq(fi_cq_open(g.dom, &ca, &g.cq, nullptr), 0);
	uint8_t a[32], b[32];
	g.ep = open_enabled(a);
	g.peer = open_enabled(b);
	cr_assert_eq(fi_av_insert(g.av, b, 1, &g.to, 0, nullptr), 1);
	cr_assert_eq(fi_endpoint(g.dom, g.info, &g.raw, nullptr), 0);
	cr_assert_eq(fi_mr_reg(g.dom, g.buf.data(), kBuf,
			       FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &g.mr,
			       nullptr),
		     0);
	g.desc = fi_mr_desc(g.mr);
	g.key = fi_mr_key(g.mr);
}

void setup_rdm() { setup(true); }
void setup_direct() { setup(false); }

void teardown()
{
	/* What a row closed itself is null. */
	for (fid_ep *e : {g.ep, g.peer, g.raw})
		if (e)
			fi_close(&e->fid);
	if (g.mr)
		fi_close(&g.mr->fid);
	if (g.cq)
		fi_close(&g.cq->fid);
	if (g.av)
		fi_close(&g.av->fid);
	if (g.dom)
		fi_close(&g.dom->fid);
	if (g.fab)
		fi_close(&g.fab->fid);
	fi_freeinfo(g.info);
	g = World{};
}

/* Captures what libfabric logs (stderr) while `call` runs. */
template <typename F> std::string logged_by(F call, long &ret)
{
	fflush(stderr);
	FILE *log = tmpfile();
	cr_assert_not_null(log);
	const int saved = dup(2);
	dup2(fileno(log), 2);
	ret = long(call());
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	std::string text;
	rewind(log);
	for (int ch; (ch = fgetc(log)) != EOF;)
		text += char(ch);
	fclose(log);
	return text;
}

/*
 * One row: the call must return `expected`; when `hint` is set, the provider must have
 * logged a warning (once) that contains it, the part that says what to do.
 */
template <typename F> void row(const char *name, long expected, const char *hint, F call)
{
	long ret = 0;
	const std::string text = logged_by(call, ret);
	cr_assert_eq(ret, expected, "%s: got %ld (%s), expected %ld (%s)", name, ret, fi_strerror(int(-ret)), expected,
		     fi_strerror(int(-expected)));
	if (!hint)
		return;
	const size_t at = text.find(hint);
	cr_assert(text.find(":efa:") != std::string::npos && at != std::string::npos,
		  "%s: no efa log line containing '%s'; the log was: '%s'", name, hint, text.c_str());
}

} // namespace

TestSuite(misuse_efa, .init = setup_rdm, .fini = teardown, .timeout = 30);
TestSuite(misuse_direct, .init = setup_direct, .fini = teardown, .timeout = 30);

/*
 * The table. MISUSE(name, fabrics, expected, hint, expression): `fabrics` is BOTH, RDM
 * or DIRECT; the expression is the bad call, evaluated with the World `g` ready.
 */
#define MISUSE_RDM(name, expected, hint, ...)                                                    \
	Test(misuse_efa, name) { row(#name, (expected), (hint), [&] { return (__VA_ARGS__); }); }
#define MISUSE_DIRECT(name, expected, hint, ...)                                                 \
	Test(misuse_direct, name) { row(#name, (expected), (hint), [&] { return (__VA_ARGS__); }); }
#define MISUSE(name, expected, hint, ...)                                                        \
	MISUSE_RDM(name, expected, hint, __VA_ARGS__)                                             \
	MISUSE_DIRECT(name, expected, hint, __VA_ARGS__)

namespace {

/* Helpers that build the arguments a row needs. */
fid_fabric *scratch_fab;
fid_domain *scratch_dom;
fid_ep *scratch_ep;
fid_cq *scratch_cq;
fid_av *scratch_av;
fid_mr *scratch_mr;

iovec iovs[8];
void *descs[8];

size_t fill_iovs(size_t n)
{
	for (size_t i = 0; i < n && i < 8; i++) {
		iovs[i] = iovec{g.buf.data() + i * 64, 64};
		descs[i] = g.desc;
	}
	return n;
}

ssize_t sendmsg_flags(uint64_t flags)
{
	fill_iovs(1);
	fi_msg m{iovs, descs, 1, g.to, nullptr, 0};
	return fi_sendmsg(g.ep, &m, flags);
}

ssize_t recvmsg_flags(uint64_t flags)
{
	fill_iovs(1);
	fi_msg m{iovs, descs, 1, FI_ADDR_UNSPEC, nullptr, 0};
	return fi_recvmsg(g.ep, &m, flags);
}

ssize_t rmamsg(bool write, size_t iov_count, size_t rma_count, uint64_t flags)
{
	fill_iovs(iov_count);
	fi_rma_iov r[4];
	for (size_t i = 0; i < 4; i++)
		r[i] = fi_rma_iov{g.addr() + 2048 + i * 64, 64, g.key};
	fi_msg_rma m{};
	m.msg_iov = iovs;
	m.desc = descs;
	m.iov_count = iov_count;
	m.addr = g.to;
	m.rma_iov = r;
	m.rma_iov_count = rma_count;
	return write ? fi_writemsg(g.ep, &m, flags) : fi_readmsg(g.ep, &m, flags);
}

size_t tx_iov_limit() { return g.info->tx_attr->iov_limit; }
size_t rx_iov_limit() { return g.info->rx_attr->iov_limit; }

ssize_t atomic_count(size_t count)
{
	return fi_atomic(g.ep, g.buf.data(), count, g.desc, g.to, g.addr(), g.key, FI_UINT64, FI_SUM, nullptr);
}

size_t atomic_max()
{
	size_t count = 0;
	cr_assert_eq(fi_atomicvalid(g.ep, FI_UINT64, FI_SUM, &count), 0);
	cr_assert_gt(count, 0u);
	return count;
}

int close_twice(fid_t f)
{
	cr_assert_eq(fi_close(f), 0);
	return fi_close(f);
}

/* A fresh domain (of the test's fabric) with a live child, closed while it has it. */
int close_domain_with(bool with_ep)
{
	cr_assert_eq(fi_domain(g.fab, g.info, &scratch_dom, nullptr), 0);
	if (with_ep)
		cr_assert_eq(fi_endpoint(scratch_dom, g.info, &scratch_ep, nullptr), 0);
	else
		cr_assert_eq(fi_mr_reg(scratch_dom, g.buf.data(), kBuf, FI_SEND, 0, 0, 0, &scratch_mr, nullptr), 0);
	return fi_close(&scratch_dom->fid);
}

void close_domain_after()
{
	/* The domain still works, and closes once its child is gone. */
	if (scratch_ep)
		cr_assert_eq(fi_close(&scratch_ep->fid), 0);
	if (scratch_mr)
		cr_assert_eq(fi_close(&scratch_mr->fid), 0);
	cr_assert_eq(fi_close(&scratch_dom->fid), 0);
	scratch_ep = nullptr;
	scratch_mr = nullptr;
	scratch_dom = nullptr;
}

} // namespace

/* ------------------------------------------------------------------ NULL pointers */

MISUSE(fabric_null_attr, -FI_EINVAL, nullptr, fi_fabric(nullptr, &scratch_fab, nullptr))
MISUSE(fabric_null_out, -FI_EINVAL, "fi_fabric", fi_fabric(g.info->fabric_attr, nullptr, nullptr))
MISUSE(domain_null_info, -FI_EINVAL, "fi_domain", fi_domain(g.fab, nullptr, &scratch_dom, nullptr))
MISUSE(domain_null_out, -FI_EINVAL, "fi_domain", fi_domain(g.fab, g.info, nullptr, nullptr))
MISUSE(endpoint_null_info, -FI_EINVAL, "fi_endpoint", fi_endpoint(g.dom, nullptr, &scratch_ep, nullptr))
MISUSE(endpoint_null_out, -FI_EINVAL, "fi_endpoint", fi_endpoint(g.dom, g.info, nullptr, nullptr))
MISUSE(cq_open_null_attr, -FI_EINVAL, "fi_cq_open", fi_cq_open(g.dom, nullptr, &scratch_cq, nullptr))
MISUSE(cq_open_null_out, -FI_EINVAL, "fi_cq_open", [] {
	fi_cq_attr a{};
	return fi_cq_open(g.dom, &a, nullptr, nullptr);
}())
MISUSE(av_open_null_attr, -FI_EINVAL, "fi_av_open", fi_av_open(g.dom, nullptr, &scratch_av, nullptr))
MISUSE(av_open_null_out, -FI_EINVAL, "fi_av_open", [] {
	fi_av_attr a{};
	a.type = FI_AV_TABLE;
	return fi_av_open(g.dom, &a, nullptr, nullptr);
}())
MISUSE(mr_reg_null_out, -FI_EINVAL, "fi_mr_reg",
       fi_mr_reg(g.dom, g.buf.data(), kBuf, FI_SEND, 0, 0, 0, nullptr, nullptr))
MISUSE(mr_reg_null_buf, -FI_EINVAL, "fi_mr_reg", fi_mr_reg(g.dom, nullptr, kBuf, FI_SEND, 0, 0, 0, &scratch_mr, nullptr))
MISUSE(mr_regattr_null_attr, -FI_EINVAL, "fi_mr_regattr", fi_mr_regattr(g.dom, nullptr, 0, &scratch_mr))
MISUSE(av_insert_null_addr, -FI_EINVAL, "fi_av_insert", fi_av_insert(g.av, nullptr, 1, &g.to, 0, nullptr))

/* ------------------------------------------------------------------ MR registration */

MISUSE(mr_reg_zero_length, -FI_EINVAL, "fi_mr_reg",
       fi_mr_reg(g.dom, g.buf.data(), 0, FI_SEND, 0, 0, 0, &scratch_mr, nullptr))
MISUSE(mr_reg_unknown_access, -FI_EINVAL, "fi_mr_reg",
       fi_mr_reg(g.dom, g.buf.data(), kBuf, FI_SEND | FI_TAGGED, 0, 0, 0, &scratch_mr, nullptr))
MISUSE(mr_reg_unknown_flags, -FI_EINVAL, "fi_mr_reg",
       fi_mr_reg(g.dom, g.buf.data(), kBuf, FI_SEND, 0, 0, FI_MULTI_RECV, &scratch_mr, nullptr))
MISUSE(mr_regv_too_many_iovs, -FI_EINVAL, "mr_iov_limit",
       fi_mr_regv(g.dom, iovs, fill_iovs(2), FI_SEND, 0, 0, 0, &scratch_mr, nullptr))

/* ------------------------------------------------------------------ fi_ep_bind */

MISUSE(ep_bind_domain, -FI_EINVAL, "fi_ep_bind", fi_ep_bind(g.raw, &g.dom->fid, 0))
MISUSE(ep_bind_mr, -FI_EINVAL, "fi_ep_bind", fi_ep_bind(g.raw, &g.mr->fid, 0))
MISUSE(ep_bind_cq_without_direction, -FI_EINVAL, "FI_TRANSMIT", fi_ep_bind(g.raw, &g.cq->fid, 0))
MISUSE(ep_bind_cq_unknown_flags, -FI_EINVAL, "fi_ep_bind", fi_ep_bind(g.raw, &g.cq->fid, FI_TRANSMIT | FI_TAGGED))
MISUSE(ep_bind_av_with_flags, -FI_EINVAL, "fi_ep_bind", fi_ep_bind(g.raw, &g.av->fid, FI_SEND))
MISUSE(ep_bind_second_av, -FI_EINVAL, "fi_ep_bind", [] {
	cr_assert_eq(fi_ep_bind(g.raw, &g.av->fid, 0), 0);
	return fi_ep_bind(g.raw, &g.av->fid, 0);
}())
MISUSE(ep_bind_second_tx_cq, -FI_EINVAL, "fi_ep_bind", [] {
	cr_assert_eq(fi_ep_bind(g.raw, &g.cq->fid, FI_TRANSMIT), 0);
	return fi_ep_bind(g.raw, &g.cq->fid, FI_TRANSMIT);
}())
MISUSE(ep_bind_after_enable, -FI_EINVAL, "fi_enable", fi_ep_bind(g.ep, &g.cq->fid, FI_RECV))

/* ------------------------------------------------------------------ fi_enable */

MISUSE(enable_without_av, -FI_ENOAV, "address vector", [] {
	cr_assert_eq(fi_ep_bind(g.raw, &g.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	return fi_enable(g.raw);
}())
MISUSE(enable_without_cq, -FI_ENOCQ, "bind a CQ", [] {
	cr_assert_eq(fi_ep_bind(g.raw, &g.av->fid, 0), 0);
	return fi_enable(g.raw);
}())
MISUSE(enable_without_rx_cq, -FI_ENOCQ, "FI_RECV", [] {
	cr_assert_eq(fi_ep_bind(g.raw, &g.av->fid, 0), 0);
	cr_assert_eq(fi_ep_bind(g.raw, &g.cq->fid, FI_TRANSMIT), 0);
	return fi_enable(g.raw);
}())

/* ------------------------------------------------------------------ before fi_enable */

MISUSE(send_before_enable, -FI_EOPBADSTATE, "fi_enable", fi_send(g.raw, g.buf.data(), 8, g.desc, 0, nullptr))
MISUSE(recv_before_enable, -FI_EOPBADSTATE, "fi_enable", fi_recv(g.raw, g.buf.data(), 8, g.desc, 0, nullptr))
MISUSE(read_before_enable, -FI_EOPBADSTATE, "fi_enable",
       fi_read(g.raw, g.buf.data(), 8, g.desc, 0, g.addr(), g.key, nullptr))
MISUSE(write_before_enable, -FI_EOPBADSTATE, "fi_enable",
       fi_write(g.raw, g.buf.data(), 8, g.desc, 0, g.addr(), g.key, nullptr))
MISUSE_RDM(tsend_before_enable, -FI_EOPBADSTATE, "fi_enable",
	   fi_tsend(g.raw, g.buf.data(), 8, g.desc, 0, 1, nullptr))
MISUSE_RDM(atomic_before_enable, -FI_EOPBADSTATE, "fi_enable",
	   fi_atomic(g.raw, g.buf.data(), 1, g.desc, 0, g.addr(), g.key, FI_UINT64, FI_SUM, nullptr))
MISUSE(getname_before_enable, -FI_EOPBADSTATE, "fi_enable", [] {
	uint8_t a[32];
	size_t len = sizeof a;
	return fi_getname(&g.raw->fid, a, &len);
}())

/* ------------------------------------------------------------------ sizes and iov counts */

MISUSE(inject_larger_than_inject_size, -FI_EMSGSIZE, "inject_size",
       fi_inject(g.ep, g.buf.data(), g.info->tx_attr->inject_size + 1, g.to))
MISUSE_DIRECT(send_larger_than_max_msg_size, -FI_EMSGSIZE, "max_msg_size",
	      fi_send(g.ep, g.buf.data(), g.info->ep_attr->max_msg_size + 1, g.desc, g.to, nullptr))
MISUSE_DIRECT(send_larger_than_mtu, -FI_EMSGSIZE, "fi_write", [] {
	/* max_msg_size covers RMA; a send is one packet, at most the MTU. */
	std::vector<uint8_t> big(65536);
	return fi_send(g.ep, big.data(), big.size(), g.desc, g.to, nullptr);
}())
MISUSE_DIRECT(write_larger_than_max_msg_size, -FI_EMSGSIZE, "max_msg_size",
	      fi_write(g.ep, g.buf.data(), g.info->ep_attr->max_msg_size + 1, g.desc, g.to, g.addr(), g.key, nullptr))
MISUSE(sendv_beyond_iov_limit, -FI_EINVAL, "iov_limit",
       fi_sendv(g.ep, iovs, descs, fill_iovs(tx_iov_limit() + 1), g.to, nullptr))
MISUSE(recvv_beyond_iov_limit, -FI_EINVAL, "iov_limit",
       fi_recvv(g.ep, iovs, descs, fill_iovs(rx_iov_limit() + 1), FI_ADDR_UNSPEC, nullptr))
MISUSE(writev_beyond_iov_limit, -FI_EINVAL, "iov_limit",
       fi_writev(g.ep, iovs, descs, fill_iovs(tx_iov_limit() + 1), g.to, g.addr(), g.key, nullptr))
MISUSE(writemsg_beyond_rma_iov_limit, -FI_EINVAL, "rma_iov_limit",
       rmamsg(true, 1, g.info->tx_attr->rma_iov_limit + 1, 0))
MISUSE(readmsg_without_rma_iov, -FI_EINVAL, "rma_iov_limit", rmamsg(false, 1, 0, 0))
MISUSE(write_longer_than_remote_iov, -FI_EINVAL, "remote", [] {
	fill_iovs(1);
	fi_rma_iov r{g.addr(), 32, g.key};
	fi_msg_rma m{};
	m.msg_iov = iovs;
	m.desc = descs;
	m.iov_count = 1;
	m.addr = g.to;
	m.rma_iov = &r;
	m.rma_iov_count = 1;
	return fi_writemsg(g.ep, &m, 0);
}())

/* ------------------------------------------------------------------ FI_MR_LOCAL (efa-direct) */

MISUSE_DIRECT(send_without_desc, -FI_EINVAL, "fi_mr_desc", fi_send(g.ep, g.buf.data(), 8, nullptr, g.to, nullptr))
MISUSE_DIRECT(recv_without_desc, -FI_EINVAL, "fi_mr_desc",
	      fi_recv(g.ep, g.buf.data(), 8, nullptr, FI_ADDR_UNSPEC, nullptr))
MISUSE_DIRECT(write_without_desc, -FI_EINVAL, "fi_mr_desc",
	      fi_write(g.ep, g.buf.data(), 8, nullptr, g.to, g.addr(), g.key, nullptr))
MISUSE_DIRECT(read_without_desc, -FI_EINVAL, "fi_mr_desc",
	      fi_read(g.ep, g.buf.data(), 8, nullptr, g.to, g.addr(), g.key, nullptr))
MISUSE_DIRECT(send_outside_its_desc, -FI_EINVAL, "fi_mr_desc", [] {
	std::vector<uint8_t> other(64);
	return fi_send(g.ep, other.data(), other.size(), g.desc, g.to, nullptr);
}())
MISUSE_DIRECT(send_with_a_bogus_desc, -FI_EINVAL, "fi_mr_desc", [] {
	uint64_t junk[8] = {};
	return fi_send(g.ep, g.buf.data(), 8, junk, g.to, nullptr);
}())

/* ------------------------------------------------------------------ destination addresses */

MISUSE(send_to_never_inserted_addr, -FI_EINVAL, "fi_av_insert", fi_send(g.ep, g.buf.data(), 8, g.desc, 7, nullptr))
MISUSE(send_to_out_of_range_addr, -FI_EINVAL, "fi_av_insert",
       fi_send(g.ep, g.buf.data(), 8, g.desc, fi_addr_t(1) << 40, nullptr))
MISUSE(send_to_addr_notavail, -FI_EINVAL, "fi_av_insert",
       fi_send(g.ep, g.buf.data(), 8, g.desc, FI_ADDR_NOTAVAIL, nullptr))
MISUSE(write_to_never_inserted_addr, -FI_EINVAL, "fi_av_insert",
       fi_write(g.ep, g.buf.data(), 8, g.desc, 7, g.addr(), g.key, nullptr))
MISUSE(read_to_addr_notavail, -FI_EINVAL, "fi_av_insert",
       fi_read(g.ep, g.buf.data(), 8, g.desc, FI_ADDR_NOTAVAIL, g.addr(), g.key, nullptr))
MISUSE_RDM(atomic_to_never_inserted_addr, -FI_EINVAL, "fi_av_insert",
	   fi_atomic(g.ep, g.buf.data(), 1, g.desc, 7, g.addr(), g.key, FI_UINT64, FI_SUM, nullptr))

/* ------------------------------------------------------------------ flags not allowed for the op */

MISUSE(sendmsg_with_multi_recv, -FI_EINVAL, "flags", sendmsg_flags(FI_MULTI_RECV))
MISUSE(sendmsg_with_unknown_flag, -FI_EINVAL, "flags", sendmsg_flags(1ull << 55))
MISUSE(recvmsg_with_inject, -FI_EINVAL, "flags", recvmsg_flags(FI_INJECT))
MISUSE(writemsg_with_multi_recv, -FI_EINVAL, "flags", rmamsg(true, 1, 1, FI_MULTI_RECV))
MISUSE(readmsg_with_multi_recv, -FI_EINVAL, "flags", rmamsg(false, 1, 1, FI_MULTI_RECV))

/* ------------------------------------------------------------------ atomics */

MISUSE_RDM(atomic_unsupported_op, -FI_EOPNOTSUPP, "fi_atomicvalid",
	   fi_atomic(g.ep, g.buf.data(), 1, g.desc, g.to, g.addr(), g.key, FI_FLOAT, FI_BOR, nullptr))
MISUSE_RDM(atomic_unknown_datatype, -FI_EOPNOTSUPP, "fi_atomicvalid",
	   fi_atomic(g.ep, g.buf.data(), 1, g.desc, g.to, g.addr(), g.key, fi_datatype(200), FI_SUM, nullptr))
MISUSE_RDM(atomic_beyond_atomicvalid_count, -FI_EINVAL, "fi_atomicvalid", atomic_count(atomic_max() + 1))
MISUSE_RDM(atomic_zero_count, -FI_EINVAL, "count", atomic_count(0))
MISUSE_DIRECT(atomic_on_efa_direct, -FI_ENOSYS, nullptr, atomic_count(1))
MISUSE_DIRECT(tsend_on_efa_direct, -FI_ENOSYS, nullptr, fi_tsend(g.ep, g.buf.data(), 8, g.desc, g.to, 1, nullptr))

/* ------------------------------------------------------------------ CQ reads */

MISUSE(cq_read_null_buf, -FI_EINVAL, "fi_cq_read", fi_cq_read(g.cq, nullptr, 1))
MISUSE(cq_read_count_zero, -FI_EAGAIN, nullptr, [] {
	fi_cq_data_entry e;
	return fi_cq_read(g.cq, &e, 0);
}())
MISUSE(cq_readerr_null_buf, -FI_EINVAL, "fi_cq_readerr", fi_cq_readerr(g.cq, nullptr, 0))
MISUSE(cq_readerr_bad_flags, -FI_EINVAL, "fi_cq_readerr", [] {
	fi_cq_err_entry e{};
	return fi_cq_readerr(g.cq, &e, FI_SEND);
}())

/* ------------------------------------------------------------------ closing */

MISUSE(close_domain_with_live_endpoint, -FI_EBUSY, "close", close_domain_with(true))
MISUSE(close_domain_with_live_mr, -FI_EBUSY, "close", close_domain_with(false))
MISUSE(close_endpoint_twice, -FI_EINVAL, nullptr, [] {
	fid_ep *e = g.raw;
	g.raw = nullptr;
	return close_twice(&e->fid);
}())
MISUSE(close_mr_twice, -FI_EINVAL, nullptr, [] {
	fid_mr *m = g.mr;
	g.mr = nullptr;
	return close_twice(&m->fid);
}())
MISUSE(close_domain_twice, -FI_EINVAL, nullptr, [] {
	cr_assert_eq(fi_domain(g.fab, g.info, &scratch_dom, nullptr), 0);
	return close_twice(&scratch_dom->fid);
}())
MISUSE(send_on_closed_endpoint, -FI_EINVAL, nullptr, [] {
	fid_ep *e = g.peer;
	g.peer = nullptr;
	cr_assert_eq(fi_close(&e->fid), 0);
	return fi_send(e, g.buf.data(), 8, g.desc, g.to, nullptr);
}())

/* After a refused close the domain is intact and closes properly. */
Test(misuse_efa, close_domain_busy_then_clean)
{
	cr_assert_eq(close_domain_with(true), -FI_EBUSY);
	close_domain_after();
	cr_assert_eq(close_domain_with(false), -FI_EBUSY);
	close_domain_after();
}
Test(misuse_direct, close_domain_busy_then_clean)
{
	cr_assert_eq(close_domain_with(true), -FI_EBUSY);
	close_domain_after();
	cr_assert_eq(close_domain_with(false), -FI_EBUSY);
	close_domain_after();
}

/* After every refused post the endpoints still work: a send and its receive complete. */
static void still_works()
{
	uint8_t *rx = g.buf.data() + 1024;
	const uint8_t *tx = g.buf.data();
	for (int i = 0; i < 64; i++)
		g.buf[i] = uint8_t(i * 3 + 1);
	std::memset(rx, 0, 64);
	cr_assert_eq(fi_recv(g.peer, rx, 64, g.desc, FI_ADDR_UNSPEC, nullptr), 0);
	cr_assert_eq(fi_send(g.ep, tx, 64, g.desc, g.to, nullptr), 0);
	int got = 0;
	for (int spin = 0; got < 2 && spin < 2000000; spin++) {
		fi_cq_data_entry e;
		ssize_t n = fi_cq_read(g.cq, &e, 1);
		cr_assert(n == 1 || n == -FI_EAGAIN, "fi_cq_read: %zd", n);
		got += n == 1;
	}
	cr_assert_eq(got, 2);
	cr_assert_eq(std::memcmp(rx, tx, 64), 0);
}

static void refuse_all()
{
	cr_assert_eq(fi_send(g.ep, g.buf.data(), 8, g.desc, 7, nullptr), -FI_EINVAL);
	cr_assert_eq(fi_sendv(g.ep, iovs, descs, fill_iovs(tx_iov_limit() + 1), g.to, nullptr), -FI_EINVAL);
	cr_assert_eq(sendmsg_flags(FI_MULTI_RECV), -FI_EINVAL);
	cr_assert_eq(rmamsg(true, 1, 2, 0), -FI_EINVAL);
	cr_assert_eq(fi_inject(g.ep, g.buf.data(), g.info->tx_attr->inject_size + 1, g.to), -FI_EMSGSIZE);
}

Test(misuse_efa, endpoint_works_after_refusals)
{
	refuse_all();
	still_works();
}
Test(misuse_direct, endpoint_works_after_refusals)
{
	refuse_all();
	still_works();
}
