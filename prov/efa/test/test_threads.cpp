/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * FI_THREAD_SAFE stress, through the public API on the software device, for both
 * fabrics (efa and efa-direct): one domain, one AV and two endpoints A and B, each with
 * its own CQ, shared by kThreads threads. Every thread, round after round:
 *
 *  - registers fresh local buffers (fi_mr_reg) and closes them at the end of the round,
 *  - posts an untagged receive on the peer endpoint and, on efa, a tagged receive for
 *    a tag only it uses; then the matching sends (fi_sendmsg, with FI_MORE every other
 *    round, so that a batch one thread opens another may complete; fi_inject every
 *    fourth round; fi_tsend) from its own endpoint,
 *  - writes a pattern into its region of the peer's memory (fi_write), reads it back
 *    (fi_read) and compares both the peer's memory and what came back,
 *  - reads both CQs (fi_cq_read) until its operations are complete: a completion goes
 *    to whichever thread reads it, so every thread reaps the others' too.
 *
 * Even threads send from A to B, odd ones from B to A, so both endpoints and both CQs
 * have posting and reading threads. Untagged receives match any sender's message:
 * every message carries its sender and sequence number, its payload is checked against
 * them, and at the end every message must have been received exactly once. Every
 * operation that asks for a completion is counted, must complete exactly once and
 * without error, and both CQs must be empty at the end. A deadline bounds each wait.
 *
 * A plain program, not a Criterion suite: Criterion's runner cannot start under
 * ThreadSanitizer (its boxfort arena fails, "Could not initialize inheritable arena",
 * Criterion issue #274), and this is the test that must run under it
 * (contrib/sanitize.sh thread). Exit status: 0 pass, 1 fail (the reason on stderr).
 *
 *   prov/efa/test/test_threads [efa|efa-direct]   (default: both)
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 200; /* per thread; a few seconds under ThreadSanitizer */
constexpr size_t kRegion = 16384; /* each thread's RMA region in the peer's memory */
constexpr auto kWait = std::chrono::seconds(30);

/* What every message starts with. */
struct MsgHdr {
	uint32_t magic;
	uint32_t thread;
	uint32_t seq;
	uint32_t len;
};
constexpr uint32_t kMagic = 0x5448524d;

uint8_t pattern(uint32_t thread, uint32_t seq, size_t i) { return uint8_t(thread * 131 + seq * 17 + i * 7 + 1); }

/* An operation; its completion (read by any thread) lands here. */
struct Op {
	fi_context2 ctx; /* first: FI_CONTEXT2 */
	std::atomic<int> done{0};
	fi_cq_tagged_entry got{};
};

struct Side {
	fid_ep *ep = nullptr;
	fid_cq *cq = nullptr;
	fi_addr_t addr = FI_ADDR_UNSPEC; /* in the shared AV */
};

struct World {
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	fid_domain *dom = nullptr;
	fid_av *av = nullptr;
	Side side[2];
	bool tagged = false;
	bool virt_addr = false;
	size_t max_msg = 0;
	size_t inject = 0;

	/* Each thread's region in the memory of the endpoint it targets. */
	std::vector<uint8_t> region[kThreads];
	fid_mr *region_mr[kThreads] = {};
	/* Each thread's buffers and operations live as long as the endpoints: after a
	 * failure, operations still in flight complete into memory that is still there. */
	struct Bufs {
		std::vector<uint8_t> sbuf, rbuf, tsbuf, trbuf, wbuf, rdbuf;
		std::unique_ptr<Op[]> ops;
	} bufs[kThreads];

	std::atomic<bool> failed{false};
	std::mutex fail_lock;
	std::string failure;
	std::atomic<long> completions{0};
	std::atomic<long> expected{0};
	std::atomic<int> seen[kThreads][kRounds];
};

World *w;

/* A failed check of the main thread: the reason, and the test fails. */
#define CHECK(cond, ...)                                                                               \
	do {                                                                                           \
		if (!(cond)) {                                                                         \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
			fprintf(stderr, " " __VA_ARGS__);                                              \
			fprintf(stderr, "\n");                                                         \
			exit(1);                                                                       \
		}                                                                                      \
	} while (0)

void fail(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	std::lock_guard<std::mutex> g(w->fail_lock);
	if (!w->failed.exchange(true))
		w->failure = buf;
}

/* Reads up to a few completions of each CQ and hands them to their operations.
 * Returns false on a CQ error (recorded). */
bool reap()
{
	for (Side &s : w->side) {
		fi_cq_tagged_entry e[8];
		ssize_t n = fi_cq_read(s.cq, e, 8);
		if (n == -FI_EAGAIN)
			continue;
		if (n == -FI_EAVAIL) {
			fi_cq_err_entry err{};
			char text[256] = "";
			err.err_data = text;
			err.err_data_size = sizeof text;
			ssize_t r = fi_cq_readerr(s.cq, &err, 0);
			if (r == -FI_EAGAIN)
				continue; /* another thread took it: it records the failure */
			fail("fi_cq_readerr: %zd, completion error %d (%s), prov_errno %d: %s", r, err.err,
			     fi_strerror(err.err), err.prov_errno, text);
			return false;
		}
		if (n < 0) {
			fail("fi_cq_read: %s", fi_strerror(int(-n)));
			return false;
		}
		for (ssize_t i = 0; i < n; i++) {
			Op *op = static_cast<Op *>(e[i].op_context);
			if (!op) {
				fail("a completion without context (flags 0x%llx)", (unsigned long long)e[i].flags);
				return false;
			}
			op->got = e[i];
			w->completions.fetch_add(1, std::memory_order_relaxed);
			if (op->done.fetch_add(1, std::memory_order_release) != 0) {
				fail("an operation completed twice (flags 0x%llx)", (unsigned long long)e[i].flags);
				return false;
			}
		}
	}
	return true;
}

bool expired(std::chrono::steady_clock::time_point deadline, const char *what)
{
	if (std::chrono::steady_clock::now() < deadline)
		return false;
	fail("%s: no completion within %lld s", what, (long long)kWait.count());
	return true;
}

/* Posts with `post` until it is accepted, reading the CQs while it says -FI_EAGAIN. */
template <typename F> bool post(const char *what, F &&f)
{
	const auto deadline = std::chrono::steady_clock::now() + kWait;
	for (;;) {
		ssize_t r = f();
		if (r == 0)
			return true;
		if (r != -FI_EAGAIN) {
			fail("%s: %s", what, fi_strerror(int(-r)));
			return false;
		}
		if (!reap() || expired(deadline, what))
			return false;
	}
}

bool wait_for(std::initializer_list<Op *> ops, const char *what)
{
	const auto deadline = std::chrono::steady_clock::now() + kWait;
	for (;;) {
		bool all = true;
		for (Op *op : ops)
			all = all && op->done.load(std::memory_order_acquire);
		if (all)
			return true;
		if (w->failed.load() || !reap() || expired(deadline, what))
			return false;
	}
}

fid_mr *reg(void *buf, size_t len, uint64_t access)
{
	fid_mr *mr = nullptr;
	if (int r = fi_mr_reg(w->dom, buf, len, access, 0, 0, 0, &mr, nullptr)) {
		fail("fi_mr_reg: %s", fi_strerror(-r));
		return nullptr;
	}
	return mr;
}

/* Checks a received message against the sender and sequence it carries; counts it. */
bool check_msg(const uint8_t *buf, size_t len, const char *what)
{
	MsgHdr h;
	if (len < sizeof h) {
		fail("%s: %zu bytes, shorter than a header", what, len);
		return false;
	}
	std::memcpy(&h, buf, sizeof h);
	if (h.magic != kMagic || h.thread >= kThreads || h.seq >= kRounds || h.len != len) {
		fail("%s: bad header (magic %x thread %u seq %u len %u, received %zu)", what, h.magic, h.thread, h.seq,
		     h.len, len);
		return false;
	}
	for (size_t i = sizeof h; i < len; i++)
		if (buf[i] != pattern(h.thread, h.seq, i)) {
			fail("%s: thread %u seq %u: byte %zu differs", what, h.thread, h.seq, i);
			return false;
		}
	w->seen[h.thread][h.seq].fetch_add(1, std::memory_order_relaxed);
	return true;
}

void fill_msg(uint8_t *buf, uint32_t thread, uint32_t seq, size_t len)
{
	MsgHdr h{kMagic, thread, seq, uint32_t(len)};
	std::memcpy(buf, &h, sizeof h);
	for (size_t i = sizeof h; i < len; i++)
		buf[i] = pattern(thread, seq, i);
}

void worker(uint32_t t)
{
	Side &me = w->side[t % 2], &peer = w->side[1 - t % 2];
	const size_t sizes[] = {sizeof(MsgHdr), 200, 1500, std::min<size_t>(w->max_msg, 8000),
				std::min<size_t>(w->max_msg, 60000)};
	const size_t max_len = *std::max_element(std::begin(sizes), std::end(sizes));
	World::Bufs &b = w->bufs[t];
	for (auto *v : {&b.sbuf, &b.rbuf, &b.tsbuf, &b.trbuf})
		v->assign(max_len, 0);
	b.wbuf.assign(kRegion, 0);
	b.rdbuf.assign(kRegion, 0);
	b.ops.reset(new Op[kRounds * 6]);
	auto &sbuf = b.sbuf, &rbuf = b.rbuf, &tsbuf = b.tsbuf, &trbuf = b.trbuf, &wbuf = b.wbuf, &rdbuf = b.rdbuf;
	std::vector<uint8_t> &region = w->region[t];
	const uint64_t key = fi_mr_key(w->region_mr[t]);
	const uint64_t raddr = w->virt_addr ? uint64_t(uintptr_t(region.data())) : 0;

	for (uint32_t seq = 0; seq < kRounds && !w->failed.load(); seq++) {
		const size_t len = sizes[(seq + t) % std::size(sizes)];
		const bool inject = seq % 4 == 3 && len <= w->inject;
		fid_mr *smr = reg(sbuf.data(), sbuf.size(), FI_SEND);
		fid_mr *rmr = reg(rbuf.data(), rbuf.size(), FI_RECV);
		fid_mr *tsmr = reg(tsbuf.data(), tsbuf.size(), FI_SEND);
		fid_mr *trmr = reg(trbuf.data(), trbuf.size(), FI_RECV);
		fid_mr *wmr = reg(wbuf.data(), wbuf.size(), FI_WRITE);
		fid_mr *rdmr = reg(rdbuf.data(), rdbuf.size(), FI_READ);
		if (!smr || !rmr || !tsmr || !trmr || !wmr || !rdmr)
			return;

		Op *o = &b.ops[seq * 6];
		Op &recv = o[0], &send = o[1], &trecv = o[2], &tsend = o[3], &write = o[4], &read = o[5];
		const uint64_t tag = (uint64_t(t) << 32) | seq;
		fill_msg(sbuf.data(), t, seq, len);
		std::memset(rbuf.data(), 0, rbuf.size());
		/* The receive first: whatever send it matches has one posted (no RNR). */
		if (!post("fi_recv", [&] { return fi_recv(peer.ep, rbuf.data(), rbuf.size(), fi_mr_desc(rmr), FI_ADDR_UNSPEC, &recv.ctx); }))
			return;
		w->expected += 1;
		if (inject) {
			if (!post("fi_inject", [&] { return fi_inject(me.ep, sbuf.data(), len, peer.addr); }))
				return;
		} else {
			/* Every other round with FI_MORE: the next post of any thread rings the
			 * doorbell (this thread's own fi_tsend or fi_write at the latest). */
			iovec iov{sbuf.data(), len};
			void *desc = fi_mr_desc(smr);
			fi_msg msg{};
			msg.msg_iov = &iov;
			msg.desc = &desc;
			msg.iov_count = 1;
			msg.addr = peer.addr;
			msg.context = &send.ctx;
			const uint64_t flags = seq % 2 ? 0 : FI_MORE;
			if (!post("fi_sendmsg", [&] { return fi_sendmsg(me.ep, &msg, flags); }))
				return;
			w->expected += 1;
		}
		if (w->tagged) {
			fill_msg(tsbuf.data(), t, seq, len);
			std::memset(trbuf.data(), 0, trbuf.size());
			if (!post("fi_trecv", [&] { return fi_trecv(peer.ep, trbuf.data(), trbuf.size(), fi_mr_desc(trmr), FI_ADDR_UNSPEC, tag, 0, &trecv.ctx); }))
				return;
			if (!post("fi_tsend", [&] { return fi_tsend(me.ep, tsbuf.data(), len, fi_mr_desc(tsmr), peer.addr, tag, &tsend.ctx); }))
				return;
			w->expected += 2;
		}

		/* RMA: write a fresh pattern into this thread's region of the peer, read it back. */
		const size_t rlen = kRegion - seq * 97 % 4096;
		for (size_t i = 0; i < rlen; i++)
			wbuf[i] = pattern(t + 100, seq, i);
		std::memset(rdbuf.data(), 0, rdbuf.size());
		if (!post("fi_write", [&] { return fi_write(me.ep, wbuf.data(), rlen, fi_mr_desc(wmr), peer.addr, raddr, key, &write.ctx); }))
			return;
		w->expected += 1;
		if (!wait_for({&write}, "fi_write"))
			return;
		if (std::memcmp(region.data(), wbuf.data(), rlen) != 0)
			return fail("thread %u round %u: fi_write completed but the peer's memory differs", t, seq);
		if (!post("fi_read", [&] { return fi_read(me.ep, rdbuf.data(), rlen, fi_mr_desc(rdmr), peer.addr, raddr, key, &read.ctx); }))
			return;
		w->expected += 1;

		if (!wait_for({&recv, &read}, "fi_recv/fi_read") || (!inject && !wait_for({&send}, "fi_send")) ||
		    (w->tagged && !wait_for({&trecv, &tsend}, "fi_trecv/fi_tsend")))
			return;
		if (std::memcmp(rdbuf.data(), wbuf.data(), rlen) != 0)
			return fail("thread %u round %u: fi_read brought back other data than was written", t, seq);
		if (!(read.got.flags & FI_READ) || !(write.got.flags & FI_WRITE))
			return fail("thread %u round %u: RMA completion flags 0x%llx 0x%llx", t, seq,
				    (unsigned long long)write.got.flags, (unsigned long long)read.got.flags);
		if (!(recv.got.flags & FI_RECV) || !check_msg(rbuf.data(), recv.got.len, "fi_recv"))
			return;
		if (!inject && !(send.got.flags & FI_SEND))
			return fail("fi_send completion flags 0x%llx", (unsigned long long)send.got.flags);
		if (w->tagged) {
			MsgHdr h;
			std::memcpy(&h, trbuf.data(), sizeof h);
			if (!(trecv.got.flags & FI_TAGGED) || trecv.got.tag != tag || trecv.got.len != len || h.thread != t ||
			    h.seq != seq)
				return fail("thread %u round %u: tagged receive got tag %llx len %zu (thread %u seq %u)", t,
					    seq, (unsigned long long)trecv.got.tag, trecv.got.len, h.thread, h.seq);
			for (size_t i = sizeof h; i < len; i++)
				if (trbuf[i] != pattern(t, seq, i))
					return fail("thread %u round %u: tagged message byte %zu differs", t, seq, i);
		}
		for (fid_mr *mr : {smr, rmr, tsmr, trmr, wmr, rdmr})
			if (int r = fi_close(&mr->fid))
				return fail("fi_close(mr): %s", fi_strerror(-r));
	}
}

void open_world(const char *fabric)
{
	setenv("FI_PROVIDER_PATH", EFA_TEST_PROV_DIR, 1);
	setenv("FI_PROVIDER", "efa", 1);
	setenv("FI_EFA_SIM", "1", 1);
	setenv("FI_EFA_SIM_PATH", EFA_TEST_SIM_PATH, 1);
	setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 0); /* the device path */
	w = new World();
	for (auto &row : w->seen)
		for (auto &s : row)
			s = 0;
	fi_info *hints = fi_allocinfo();
	hints->caps = FI_MSG | FI_RMA;
	if (std::strcmp(fabric, "efa") == 0)
		hints->caps |= FI_TAGGED;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->fabric_attr->prov_name = strdup("efa");
	hints->fabric_attr->name = strdup(fabric);
	int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &w->info);
	fi_freeinfo(hints);
	CHECK((ret) == (0), "fi_getinfo(%s): %s", fabric, fi_strerror(-ret));
	CHECK((w->info->domain_attr->threading) == (FI_THREAD_SAFE));
	w->tagged = w->info->caps & FI_TAGGED;
	w->virt_addr = w->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	/* efa-direct: a send is one packet (the link's MTU); max_msg_size is RMA's. */
	w->max_msg = w->info->ep_attr->max_msg_size;
	if (!w->tagged && w->info->nic && w->info->nic->link_attr && w->info->nic->link_attr->mtu)
		w->max_msg = std::min<size_t>(w->max_msg, w->info->nic->link_attr->mtu);
	w->inject = w->info->tx_attr->inject_size;
	CHECK((fi_fabric(w->info->fabric_attr, &w->fab, nullptr)) == (0));
	CHECK((fi_domain(w->fab, w->info, &w->dom, nullptr)) == (0));
	fi_av_attr aattr{};
	aattr.type = FI_AV_TABLE;
	CHECK((fi_av_open(w->dom, &aattr, &w->av, nullptr)) == (0));
	for (Side &s : w->side) {
		CHECK((fi_endpoint(w->dom, w->info, &s.ep, nullptr)) == (0));
		fi_cq_attr cattr{};
		cattr.format = FI_CQ_FORMAT_TAGGED;
		cattr.size = 256;
		cattr.wait_obj = FI_WAIT_NONE;
		CHECK((fi_cq_open(w->dom, &cattr, &s.cq, nullptr)) == (0));
		CHECK((fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV)) == (0));
		CHECK((fi_ep_bind(s.ep, &w->av->fid, 0)) == (0));
		CHECK((fi_enable(s.ep)) == (0));
		uint8_t name[64];
		size_t len = sizeof name;
		CHECK((fi_getname(&s.ep->fid, name, &len)) == (0));
		CHECK((fi_av_insert(w->av, name, 1, &s.addr, 0, nullptr)) == (1));
	}
	for (int t = 0; t < kThreads; t++) {
		w->region[t].assign(kRegion, 0);
		CHECK((fi_mr_reg(w->dom, w->region[t].data(), kRegion, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0, 0,
				       &w->region_mr[t], nullptr)) == (0));
	}
}

void close_world()
{
	if (!w)
		return;
	for (fid_mr *mr : w->region_mr)
		if (mr)
			fi_close(&mr->fid);
	for (Side &s : w->side) {
		if (s.ep)
			fi_close(&s.ep->fid);
		if (s.cq)
			fi_close(&s.cq->fid);
	}
	if (w->av)
		fi_close(&w->av->fid);
	if (w->dom)
		fi_close(&w->dom->fid);
	if (w->fab)
		fi_close(&w->fab->fid);
	fi_freeinfo(w->info);
	delete w;
	w = nullptr;
}

void stress(const char *fabric)
{
	open_world(fabric);
	const auto t0 = std::chrono::steady_clock::now();
	std::vector<std::thread> threads;
	for (uint32_t t = 0; t < kThreads; t++)
		threads.emplace_back(worker, t);
	for (auto &th : threads)
		th.join();
	const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	CHECK(!w->failed.load(), "%s: %s", fabric, w->failure.c_str());

	/* Nothing left behind on either CQ, nothing completed twice or missing. */
	for (Side &s : w->side) {
		fi_cq_tagged_entry e;
		CHECK((fi_cq_read(s.cq, &e, 1)) == (-FI_EAGAIN), "%s: a completion nobody asked for", fabric);
	}
	CHECK((w->completions.load()) == (w->expected.load()), "%s: %ld completions for %ld operations", fabric, w->completions.load(), w->expected.load());
	for (int t = 0; t < kThreads; t++)
		for (int s = 0; s < kRounds; s++)
			CHECK((w->seen[t][s].load()) == (1), "%s: thread %d's message %d received %d times", fabric, t, s, w->seen[t][s].load());
	printf("PASS %s: %d threads x %d rounds, %ld completions in %.2f s\n", fabric, kThreads, kRounds,
		    w->completions.load(), secs);
	close_world();
}

} // namespace

int main(int argc, char **argv)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			CHECK(std::strcmp(argv[i], "efa") == 0 || std::strcmp(argv[i], "efa-direct") == 0,
			      "usage: %s [efa|efa-direct]...", argv[0]);
			stress(argv[i]);
		}
		return 0;
	}
	stress("efa-direct");
	stress("efa");
	return 0;
}
