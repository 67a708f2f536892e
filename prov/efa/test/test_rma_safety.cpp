/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Memory safety at the RMA target, through the public libfabric API: an RDMA or
 * emulated RMA (and, on the efa fabric, an atomic) outside a registered region, with a
 * wrong or revoked key, or into a region without the access flag, fails at the
 * initiator with an error completion (FI_EACCES, fi_efa(7) ERRORS) and writes nothing:
 * the region and the guard pages around it stay byte-identical. Afterwards the same
 * endpoints still work: a valid operation succeeds.
 *
 * Three suites, one per path:
 *  - rma_device:   the efa fabric, RDMA by the device (prov_errno: the device's status);
 *  - rma_emulated: the efa fabric with FI_OPT_EFA_USE_DEVICE_RDMA false: WRITE_REQ,
 *                  READ_REQ, ATOMIC_REQ checked by the target's protocol (prov_errno 0);
 *  - rma_direct:   efa-direct (the device's check);
 *  - rma_shm:      the efa fabric with FI_EFA_ENABLE_SHM_TRANSFER=1: the two endpoints
 *                  are same-host peers, RMA and atomics go through shm, checked against
 *                  the target's published keys before shm sees them (prov_errno 4166);
 *                  built against libfabric 1.17 only, as the provider's shm path.
 * Initiator and target are two endpoints of two domains (two protection domains) in
 * one process; reading both CQs drives both (manual progress).
 */
#include "fitest.h"
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_rma.h>

#include <criterion/criterion.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

/* rma_shm only where the provider has its shm path: built against libfabric 1.17
 * (rdm/shm.h). */
#if FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION == 17
#define EFA_TEST_SHM 1
#endif

namespace {

enum class Mode { Device, Emulated, Direct, Shm };

constexpr size_t kPage = 4096;
constexpr size_t kRegion = 4096; /* the registered part: the middle of three pages */
constexpr size_t kOp = 64;

struct Side {
	fid_domain *dom = nullptr;
	fid_av *av = nullptr;
	fid_cq *cq = nullptr;
	fid_ep *ep = nullptr;
	uint8_t name[32] = {};
	fi_addr_t peer = FI_ADDR_NOTAVAIL;
	fid_mr *mr = nullptr; /* initiator: its local buffer */
};

struct World {
	Mode mode = Mode::Device;
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	Side ini, tgt;
	std::vector<uint8_t> mem = std::vector<uint8_t>(3 * kPage); /* guard, region, guard */
	std::vector<uint8_t> local = std::vector<uint8_t>(kRegion);
	fid_mr *tmr = nullptr; /* the target's region */
	uint8_t *region() { return mem.data() + kPage; }
	uint64_t raddr(size_t off = 0) { return uint64_t(reinterpret_cast<uintptr_t>(region())) + off; }
};

World g;

void open_side(Side &s, bool emulate)
{
	cr_assert_eq(fi_domain(g.fab, g.info, &s.dom, nullptr), 0);
	fi_av_attr aa{};
	aa.type = FI_AV_TABLE;
	cr_assert_eq(fi_av_open(s.dom, &aa, &s.av, nullptr), 0);
	fi_cq_attr ca{};
	ca.format = FI_CQ_FORMAT_DATA;
	ca.size = 64;
	cr_assert_eq(fi_cq_open(s.dom, &ca, &s.cq, nullptr), 0);
	cr_assert_eq(fi_endpoint(s.dom, g.info, &s.ep, nullptr), 0);
	if (emulate) {
		bool rdma = false;
		cr_assert_eq(fi_setopt(&s.ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_USE_DEVICE_RDMA, &rdma, sizeof rdma), 0);
	}
	cr_assert_eq(fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(s.ep, &s.av->fid, 0), 0);
	cr_assert_eq(fi_enable(s.ep), 0);
	size_t len = sizeof s.name;
	cr_assert_eq(fi_getname(&s.ep->fid, s.name, &len), 0);
}

void close_side(Side &s)
{
	if (s.mr)
		fi_close(&s.mr->fid);
	if (s.ep)
		fi_close(&s.ep->fid);
	if (s.cq)
		fi_close(&s.cq->fid);
	if (s.av)
		fi_close(&s.av->fid);
	if (s.dom)
		fi_close(&s.dom->fid);
}

/* One completion on the initiator's CQ (driving the target too). Returns 1 for a
 * success, -FI_EAVAIL with `err` filled for an error. */
ssize_t wait_initiator(fi_cq_data_entry &e, fi_cq_err_entry &err)
{
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (std::chrono::steady_clock::now() < end) {
		fi_cq_data_entry t;
		ssize_t n = fi_cq_read(g.tgt.cq, &t, 1);
		cr_assert(n == 1 || n == -FI_EAGAIN, "target CQ: %zd", n);
		n = fi_cq_read(g.ini.cq, &e, 1);
		if (n == 1)
			return 1;
		if (n == -FI_EAVAIL) {
			err = fi_cq_err_entry{};
			cr_assert_eq(fi_cq_readerr(g.ini.cq, &err, 0), 1);
			return -FI_EAVAIL;
		}
		cr_assert_eq(n, -FI_EAGAIN);
	}
	cr_assert_fail("no completion on the initiator within 10 s");
	return 0;
}

/* Posts with `post` until it is not -FI_EAGAIN (a same-host peer through shm is
 * connected on the first post), reading both CQs meanwhile; returns its result. Both
 * CQs' entries read here are counted into done[0] (target), done[1] (initiator). */
template <typename F> ssize_t post_retry(F post, int *done = nullptr)
{
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	ssize_t r;
	while ((r = post()) == -FI_EAGAIN && std::chrono::steady_clock::now() < end) {
		fi_cq_data_entry e;
		ssize_t n = fi_cq_read(g.tgt.cq, &e, 1);
		cr_assert(n == 1 || n == -FI_EAGAIN, "target CQ: %zd", n);
		if (done)
			done[0] += n == 1;
		n = fi_cq_read(g.ini.cq, &e, 1);
		cr_assert(n == 1 || n == -FI_EAGAIN, "initiator CQ: %zd", n);
		if (done)
			done[1] += n == 1;
	}
	return r;
}

void expect_ok()
{
	fi_cq_data_entry e;
	fi_cq_err_entry err;
	ssize_t n = wait_initiator(e, err);
	cr_assert_eq(n, 1, "error completion: %s (prov_errno %d)", fi_strerror(err.err), err.prov_errno);
}

void setup(Mode mode)
{
	g.mode = mode;
	fitest::use_provider();
	/* One path: the target's HANDSHAKE reaches the initiator before the target's
	 * message does, so device RDMA is in use once the warm-up completes. */
	setenv("EFASIM_PATHS", "1", 1);
	if (mode == Mode::Shm)
		setenv("FI_EFA_ENABLE_SHM_TRANSFER", "1", 1);
	const bool rdm = mode != Mode::Direct;
	g.info = fitest::getinfo(rdm ? "efa" : "efa-direct", FI_MSG | FI_RMA | (rdm ? FI_ATOMIC : 0));
	fitest::open_fabric(g.info, &g.fab);
	open_side(g.ini, mode == Mode::Emulated);
	open_side(g.tgt, mode == Mode::Emulated);
	cr_assert_eq(fi_av_insert(g.ini.av, g.tgt.name, 1, &g.ini.peer, 0, nullptr), 1);
	cr_assert_eq(fi_av_insert(g.tgt.av, g.ini.name, 1, &g.tgt.peer, 0, nullptr), 1);
	cr_assert_eq(fi_mr_reg(g.ini.dom, g.local.data(), g.local.size(), FI_SEND | FI_RECV | FI_READ | FI_WRITE, 0, 0,
			       0, &g.ini.mr, nullptr),
		     0);
	g.tgt.mr = nullptr;
	std::vector<uint8_t> rbuf(64);
	fid_mr *rmr = nullptr;
	cr_assert_eq(fi_mr_reg(g.tgt.dom, rbuf.data(), rbuf.size(), FI_SEND | FI_RECV, 0, 0, 0, &rmr, nullptr), 0);

	/* Warm-up, both ways: each side learns the other (the efa fabric's handshake). */
	cr_assert_eq(fi_recv(g.tgt.ep, rbuf.data(), rbuf.size(), fi_mr_desc(rmr), FI_ADDR_UNSPEC, nullptr), 0);
	cr_assert_eq(fi_recv(g.ini.ep, g.local.data() + 512, 64, fi_mr_desc(g.ini.mr), FI_ADDR_UNSPEC, nullptr), 0);
	int done[2] = {};
	cr_assert_eq(post_retry([] { return fi_send(g.ini.ep, g.local.data(), 8, fi_mr_desc(g.ini.mr), g.ini.peer, nullptr); },
				done),
		     0);
	int tgt_done = done[0], ini_done = done[1];
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	bool sent_back = false;
	while ((tgt_done < 2 || ini_done < 2) && std::chrono::steady_clock::now() < end) {
		fi_cq_data_entry e;
		ssize_t n = fi_cq_read(g.tgt.cq, &e, 1);
		cr_assert(n == 1 || n == -FI_EAGAIN, "warm-up, target: %zd", n);
		if (n == 1 && (e.flags & FI_RECV) && !sent_back) {
			ssize_t r;
			while ((r = fi_send(g.tgt.ep, rbuf.data(), 8, fi_mr_desc(rmr), g.tgt.peer, nullptr)) == -FI_EAGAIN) {
				fi_cq_data_entry x;
				const ssize_t m = fi_cq_read(g.ini.cq, &x, 1);
				cr_assert(m == 1 || m == -FI_EAGAIN, "warm-up, initiator: %zd", m);
				ini_done += m == 1;
			}
			cr_assert_eq(r, 0);
			sent_back = true;
		}
		tgt_done += n == 1;
		n = fi_cq_read(g.ini.cq, &e, 1);
		cr_assert(n == 1 || n == -FI_EAGAIN, "warm-up, initiator: %zd", n);
		ini_done += n == 1;
	}
	cr_assert(tgt_done == 2 && ini_done == 2, "warm-up did not complete");
	cr_assert_eq(fi_close(&rmr->fid), 0);
}

void teardown()
{
	if (g.tmr)
		fi_close(&g.tmr->fid);
	close_side(g.ini);
	close_side(g.tgt);
	if (g.fab)
		fi_close(&g.fab->fid);
	fi_freeinfo(g.info);
	g = World{};
}

void setup_device() { setup(Mode::Device); }
void setup_emulated() { setup(Mode::Emulated); }
void setup_direct() { setup(Mode::Direct); }
#ifdef EFA_TEST_SHM
void setup_shm() { setup(Mode::Shm); }
#endif

enum class Op { Write, WriteData, Read, Atomic, FetchAtomic };
enum class Fault { BeforeStart, PastEnd, WrongKey, RevokedKey, NoAccess };

uint64_t access_for(Op op)
{
	switch (op) {
	case Op::Write:
	case Op::WriteData:
	case Op::Atomic: return FI_REMOTE_WRITE;
	case Op::Read: return FI_REMOTE_READ;
	default: return FI_REMOTE_READ | FI_REMOTE_WRITE;
	}
}

/* Posts `op` of kOp bytes at the target's address `raddr` with `key`. */
ssize_t post(Op op, uint64_t raddr, uint64_t key)
{
	void *desc = fi_mr_desc(g.ini.mr);
	uint8_t *buf = g.local.data();
	switch (op) {
	case Op::Write: return fi_write(g.ini.ep, buf, kOp, desc, g.ini.peer, raddr, key, nullptr);
	case Op::WriteData: return fi_writedata(g.ini.ep, buf, kOp, desc, 0x77, g.ini.peer, raddr, key, nullptr);
	case Op::Read: return fi_read(g.ini.ep, buf + 1024, kOp, desc, g.ini.peer, raddr, key, nullptr);
	case Op::Atomic:
		return fi_atomic(g.ini.ep, buf, kOp / 8, desc, g.ini.peer, raddr, key, FI_UINT64, FI_SUM, nullptr);
	case Op::FetchAtomic:
		return fi_fetch_atomic(g.ini.ep, buf, kOp / 8, desc, buf + 1024, desc, g.ini.peer, raddr, key, FI_UINT64,
				       FI_SUM, nullptr);
	}
	return -FI_EINVAL;
}

/*
 * One case: registers the target region (with `op`'s access, or without it), breaks
 * the operation as `fault` says, posts it and checks the error completion, that target
 * memory (region and guards) and the read destination are unchanged, and that a valid
 * operation afterwards succeeds and does what it should.
 */
void run_case(Op op, Fault fault)
{
	for (size_t i = 0; i < g.mem.size(); i++)
		g.mem[i] = uint8_t(i * 13 + 7);
	for (size_t i = 0; i < g.local.size(); i++)
		g.local[i] = uint8_t(i * 5 + 3);
	const std::vector<uint8_t> mem_before = g.mem, local_before = g.local;

	const uint64_t all = FI_REMOTE_READ | FI_REMOTE_WRITE;
	const uint64_t access = fault == Fault::NoAccess ? all & ~access_for(op) : all;
	/* A region that lacks both rights is still a region: on efa-direct FI_SEND keeps it
	 * a valid registration. */
	cr_assert_eq(fi_mr_reg(g.tgt.dom, g.region(), kRegion, access | FI_SEND | FI_RECV, 0, 0, 0, &g.tmr, nullptr), 0);
	uint64_t key = fi_mr_key(g.tmr);
	uint64_t raddr = g.raddr();
	switch (fault) {
	case Fault::BeforeStart: raddr = g.raddr() - kOp / 2; break;
	case Fault::PastEnd: raddr = g.raddr(kRegion - kOp / 2); break;
	case Fault::WrongKey: key = key ^ 0x5a5a00; break;
	case Fault::RevokedKey:
		cr_assert_eq(fi_close(&g.tmr->fid), 0);
		g.tmr = nullptr;
		break;
	case Fault::NoAccess: break;
	}

	cr_assert_eq(post(op, raddr, key), 0);
	fi_cq_data_entry e;
	fi_cq_err_entry err;
	ssize_t n = wait_initiator(e, err);
	cr_assert_eq(n, -FI_EAVAIL, "the operation succeeded");
	cr_assert_eq(err.err, FI_EACCES, "err %d (%s), prov_errno %d", err.err, fi_strerror(err.err), err.prov_errno);
	if (g.mode == Mode::Shm)
		cr_assert_eq(err.prov_errno, 4166, "refused before shm (PEER_KEY_REFUSED), prov_errno %d", err.prov_errno);
	else if (g.mode == Mode::Emulated || op == Op::Atomic || op == Op::FetchAtomic)
		cr_assert_eq(err.prov_errno, 4165, "the protocol's check (TARGET_REFUSED), not the device's (prov_errno %d)",
			     err.prov_errno);
	else
		cr_assert_eq(err.prov_errno, 7, "the device's REMOTE_ERROR_BAD_ADDRESS (prov_errno %d)", err.prov_errno);
	cr_assert_eq(std::memcmp(g.mem.data(), mem_before.data(), g.mem.size()), 0, "target memory changed");
	cr_assert_eq(std::memcmp(g.local.data(), local_before.data(), g.local.size()), 0,
		     "the initiator's buffers changed");

	/* The endpoints still work: a valid write, then a valid read of it. */
	if (!g.tmr)
		cr_assert_eq(fi_mr_reg(g.tgt.dom, g.region(), kRegion, all, 0, 0, 0, &g.tmr, nullptr), 0);
	else if (fault == Fault::NoAccess) {
		cr_assert_eq(fi_close(&g.tmr->fid), 0);
		cr_assert_eq(fi_mr_reg(g.tgt.dom, g.region(), kRegion, all, 0, 0, 0, &g.tmr, nullptr), 0);
	}
	key = fi_mr_key(g.tmr);
	cr_assert_eq(post(Op::Write, g.raddr(128), key), 0);
	expect_ok();
	cr_assert_eq(std::memcmp(g.region() + 128, g.local.data(), kOp), 0, "the valid write did not land");
	cr_assert_eq(post(Op::Read, g.raddr(128), key), 0);
	expect_ok();
	cr_assert_eq(std::memcmp(g.local.data() + 1024, g.local.data(), kOp), 0, "the valid read did not land");
	cr_assert_eq(std::memcmp(g.mem.data(), mem_before.data(), kPage), 0, "guard before the region changed");
	cr_assert_eq(std::memcmp(g.mem.data() + 2 * kPage, mem_before.data() + 2 * kPage, kPage), 0,
		     "guard after the region changed");
}

} // namespace

TestSuite(rma_device, .init = setup_device, .fini = teardown, .timeout = 60);
TestSuite(rma_emulated, .init = setup_emulated, .fini = teardown, .timeout = 60);
TestSuite(rma_direct, .init = setup_direct, .fini = teardown, .timeout = 60);
#ifdef EFA_TEST_SHM
TestSuite(rma_shm, .init = setup_shm, .fini = teardown, .timeout = 60);
#endif

#define CASE(suite, op, fault) \
	Test(suite, op##_##fault) { run_case(Op::op, Fault::fault); }
#define RMA_CASES(suite)                       \
	CASE(suite, Write, BeforeStart)        \
	CASE(suite, Write, PastEnd)            \
	CASE(suite, Write, WrongKey)           \
	CASE(suite, Write, RevokedKey)         \
	CASE(suite, Write, NoAccess)           \
	CASE(suite, WriteData, BeforeStart)    \
	CASE(suite, WriteData, PastEnd)        \
	CASE(suite, WriteData, WrongKey)       \
	CASE(suite, WriteData, RevokedKey)     \
	CASE(suite, WriteData, NoAccess)       \
	CASE(suite, Read, BeforeStart)         \
	CASE(suite, Read, PastEnd)             \
	CASE(suite, Read, WrongKey)            \
	CASE(suite, Read, RevokedKey)          \
	CASE(suite, Read, NoAccess)
#define ATOMIC_CASES(suite)                    \
	CASE(suite, Atomic, BeforeStart)       \
	CASE(suite, Atomic, PastEnd)           \
	CASE(suite, Atomic, WrongKey)          \
	CASE(suite, Atomic, RevokedKey)        \
	CASE(suite, Atomic, NoAccess)          \
	CASE(suite, FetchAtomic, BeforeStart)  \
	CASE(suite, FetchAtomic, PastEnd)      \
	CASE(suite, FetchAtomic, WrongKey)     \
	CASE(suite, FetchAtomic, RevokedKey)   \
	CASE(suite, FetchAtomic, NoAccess)

RMA_CASES(rma_device)
RMA_CASES(rma_emulated)
ATOMIC_CASES(rma_emulated)
RMA_CASES(rma_direct)
#ifdef EFA_TEST_SHM
RMA_CASES(rma_shm)
ATOMIC_CASES(rma_shm)
#endif

/* A range whose end wraps around the address space is outside every region. */
static void wrap_case(Op op)
{
	for (size_t i = 0; i < g.mem.size(); i++)
		g.mem[i] = uint8_t(i * 13 + 7);
	const std::vector<uint8_t> before = g.mem;
	cr_assert_eq(fi_mr_reg(g.tgt.dom, g.region(), kRegion, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &g.tmr,
			       nullptr),
		     0);
	cr_assert_eq(post(op, UINT64_MAX - kOp / 2, fi_mr_key(g.tmr)), 0);
	fi_cq_data_entry e;
	fi_cq_err_entry err;
	cr_assert_eq(wait_initiator(e, err), -FI_EAVAIL);
	cr_assert_eq(err.err, FI_EACCES);
	cr_assert_eq(std::memcmp(g.mem.data(), before.data(), g.mem.size()), 0);
}

Test(rma_emulated, Write_wrapping_range) { wrap_case(Op::Write); }
Test(rma_emulated, Read_wrapping_range) { wrap_case(Op::Read); }
Test(rma_emulated, Atomic_wrapping_range) { wrap_case(Op::Atomic); }
Test(rma_device, Write_wrapping_range) { wrap_case(Op::Write); }
Test(rma_direct, Read_wrapping_range) { wrap_case(Op::Read); }
#ifdef EFA_TEST_SHM
Test(rma_shm, Write_wrapping_range) { wrap_case(Op::Write); }
Test(rma_shm, Atomic_wrapping_range) { wrap_case(Op::Atomic); }
#endif

/*
 * A revoked key stays revoked: 100 000 register/close cycles of one region (the device
 * reuses its slot each time), then every old key is distinct from every other and from
 * the live one, and a sample of them (the first 512, crossing 256, which an 8-bit
 * generation would repeat, then every 997th) is refused at the target while the live key
 * works.
 */
static void revoked_keys_case()
{
	constexpr size_t kCycles = 100000;
	const uint64_t all = FI_REMOTE_READ | FI_REMOTE_WRITE;
	std::vector<uint64_t> keys;
	keys.reserve(kCycles);
	for (size_t i = 0; i < kCycles; i++) {
		fid_mr *mr = nullptr;
		cr_assert_eq(fi_mr_reg(g.tgt.dom, g.region(), kRegion, all, 0, 0, 0, &mr, nullptr), 0);
		keys.push_back(fi_mr_key(mr));
		cr_assert_eq(fi_close(&mr->fid), 0);
	}
	cr_assert_eq(fi_mr_reg(g.tgt.dom, g.region(), kRegion, all, 0, 0, 0, &g.tmr, nullptr), 0);
	const uint64_t live = fi_mr_key(g.tmr);
	std::vector<uint64_t> sorted = keys;
	std::sort(sorted.begin(), sorted.end());
	cr_assert(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
		  "a key came back within %zu registrations", kCycles);
	cr_assert(!std::binary_search(sorted.begin(), sorted.end(), live), "the live key is an old one");

	for (size_t i = 0; i < g.mem.size(); i++)
		g.mem[i] = uint8_t(i * 13 + 7);
	const std::vector<uint8_t> before = g.mem;
	size_t refused = 0;
	for (size_t i = 0; i < kCycles; i += i < 512 ? 1 : 997) {
		cr_assert_eq(post(Op::Write, g.raddr(), keys[i]), 0);
		fi_cq_data_entry e;
		fi_cq_err_entry err;
		cr_assert_eq(wait_initiator(e, err), -FI_EAVAIL, "old key %#lx (cycle %zu) was accepted",
			     (unsigned long)keys[i], i);
		cr_assert_eq(err.err, FI_EACCES);
		refused++;
	}
	cr_assert_eq(std::memcmp(g.mem.data(), before.data(), g.mem.size()), 0, "an old key wrote");
	cr_assert_gt(refused, 600u);
	cr_assert_eq(post(Op::Write, g.raddr(128), live), 0);
	expect_ok();
	cr_assert_eq(std::memcmp(g.region() + 128, g.local.data(), kOp), 0, "the live key's write did not land");
}

Test(rma_device, revoked_keys_stay_revoked) { revoked_keys_case(); }
Test(rma_emulated, revoked_keys_stay_revoked) { revoked_keys_case(); }
Test(rma_direct, revoked_keys_stay_revoked) { revoked_keys_case(); }
#ifdef EFA_TEST_SHM
Test(rma_shm, revoked_keys_stay_revoked) { revoked_keys_case(); }
#endif
