/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_peer_death: a peer is killed (SIGKILL) with operations in flight; the survivor's
 * operations fail within a bound, it removes the dead peer and goes on with the others,
 * and a new process on the dead one's QP number is a new peer.
 *
 * Four processes, run by fabtests/run_peer_failure.sh (not run_pair.sh): the survivor S
 * (-s) opens one control channel per peer, each printing "PORT <n>"; the script starts
 * A (-R 1) on the first, B (-R 2) on the second, and later A' (-R 3) on the third.
 *
 *   1. S exchanges names and registered regions with A and B and checks a message each
 *      way with both.
 *   2. A posts a 512 KiB tagged send to S (long-CTS: S gets its first packet only) and a
 *      small marker send after it; S's receive of the marker proves the long message is
 *      matched to S's receive and partly received. A then stops progressing.
 *   3. S posts to A: an eager and a medium send with FI_DELIVERY_COMPLETE (they wait for
 *      a RECEIPT), a 256 KiB long-CTS send (waits for a CTS), a 2 MiB send (read-based
 *      where the device reads, waits for an EOR), fi_fetch_atomic and fi_atomic (wait
 *      for a response), and, when RMA is emulated (EFASIM_PROFILE=no-rdma), fi_write
 *      and fi_read (wait for a RECEIPT / READRSP). None can complete while A is silent.
 *   4. S prints "KILL A"; the script kills A with SIGKILL and S sees A's control
 *      channel close. On a device with RDMA S then posts fi_write and fi_read to A
 *      (device RMA to a dead peer). Every operation of steps 2-4 must complete with an
 *      error (FI_EHOSTUNREACH: the device's "unresponsive remote") within the bound
 *      FI_EFA_PEER_PROBE_INTERVAL * 5/4 + EFASIM_TIMEOUT_MS + 1 s of A's death; each
 *      time is printed. A new send to A then fails at once with -FI_EHOSTUNREACH.
 *   5. S removes A (fi_av_remove); a send to A's fi_addr is -FI_EINVAL. S and B exchange
 *      verified medium, long-CTS and 2 MiB messages and an RMA read.
 *   6. S prints "QPN <A's QP number>" and opens the third channel; the script starts A'
 *      with EFASIM_FIRST_QPN set to it. S checks that A' has A's GID and QPN with another
 *      QKEY, inserts it, receives A's' medium and long messages (verified, source A'),
 *      sends it one, and finds nothing else in its CQs: nothing of A is delivered.
 *
 * -F efa-direct: steps 2 and 3 are left out (every efa-direct operation is a device
 * work request: none waits for the peer's provider), step 4 checks fi_write, fi_read and
 * fi_send posted after the death against EFASIM_TIMEOUT_MS + 1 s, messages are untagged
 * and of 4000 bytes; the rest is the same.
 */
#include "common/ft_rdm.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kEager = 1000, kMedium = 20000, kLongCts = 256 << 10, kLong = 2 << 20;
constexpr size_t kFromA = 512 << 10, kRma = 64 << 10, kRegion = 4 << 20;
constexpr uint64_t kTagFromA = 0xa1, kTagMarker = 0xa2, kTagToA = 0xa3, kTagB = 0xb1, kTagA2 = 0xc1;

/* The efa provider's address (fi_efa(7)): GID, QPN, QKEY. */
struct EfaName {
	uint8_t gid[16];
	uint16_t qpn;
	uint16_t pad;
	uint32_t qkey;
	uint64_t reserved;
};
static_assert(sizeof(EfaName) == 32);

EfaName efa_name(const std::vector<uint8_t> &n)
{
	FT_CHECK(n.size() == sizeof(EfaName), "an efa address has %zu bytes, not %zu", n.size(), sizeof(EfaName));
	EfaName e;
	memcpy(&e, n.data(), sizeof e);
	return e;
}

long env_ms(const char *name, long def)
{
	const char *v = getenv(name);
	return v && *v ? strtol(v, nullptr, 10) : def;
}

/* -F efa-direct: untagged messages up to the device's MTU, device RMA; no operation
 * waits for a peer's answer there, so only operations after the death are checked. */
bool direct() { return opts.fabric == "efa-direct"; }

bool rma_emulated()
{
	const char *p = getenv("EFASIM_PROFILE");
	return p && !strcmp(p, "no-rdma");
}

uint64_t caps()
{
	if (direct())
		return FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV;
	return FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND |
	       FI_RECV;
}

uint64_t remote_access(const Fabric &fab) { return fab.local_access() | FI_REMOTE_READ | FI_REMOTE_WRITE; }

ssize_t tsend_dc(Endpoint &ep, const Buffer &buf, size_t off, size_t len, fi_addr_t to, uint64_t tag,
		 uint64_t flags, void *ctx)
{
	iovec iov{buf.data() + off, len};
	void *desc = buf.desc();
	fi_msg_tagged m{};
	m.msg_iov = &iov;
	m.desc = &desc;
	m.iov_count = 1;
	m.addr = to;
	m.tag = tag;
	m.context = ctx;
	return fi_tsendmsg(ep, &m, flags);
}

/* A send or receive: tagged on the efa fabric, untagged (tag ignored) on efa-direct. */
ssize_t msend(fid_ep *ep, const void *p, size_t len, void *desc, fi_addr_t to, uint64_t tag, void *ctx)
{
	return direct() ? fi_send(ep, p, len, desc, to, ctx) : fi_tsend(ep, p, len, desc, to, tag, ctx);
}

ssize_t mrecv(fid_ep *ep, void *p, size_t len, void *desc, fi_addr_t from, uint64_t tag, void *ctx)
{
	return direct() ? fi_recv(ep, p, len, desc, from, ctx) : fi_trecv(ep, p, len, desc, from, tag, 0, ctx);
}

/* Message sizes: efa-direct sends at most one MTU (8928 bytes on the software device;
 * its max_msg_size is that of RMA). */
size_t msz(const Fabric &, size_t len) { return direct() ? std::min<size_t>(len, 4000) : len; }

/* One operation S expects to fail. */
struct Pending {
	const char *what;
	bool rx = false;
	fi_context2 ctx{};
	bool done = false;
};

/* ------------------------------------------------------------------ A, B, A' */

void peer(int role)
{
	Fabric fab(caps());
	Endpoint ep(fab, ep_spec(fab));
	Ctl ctl;
	fi_addr_t s = ctl.exchange_names(fab, ep);
	Buffer region(fab, kRegion, remote_access(fab));
	fill_pattern(region.data(), kRegion, 100 + uint32_t(role));
	ctl.send_mr(region);
	Buffer buf(fab, kFromA + kLong);
	fi_context2 c1{}, c2{};
	const size_t medium = msz(fab, kMedium), lcts = msz(fab, kLongCts), big = msz(fab, kLong);

	if (role == 3) {
		/* A': S must take it for a new peer: two messages, then one back. */
		fill_pattern(buf.data(), medium, 31);
		fill_pattern(buf.data() + medium, lcts, 32);
		FT_POST(mrecv(ep, buf.data() + kFromA, kEager, buf.desc(), s, kTagA2 + 2, &c1));
		ctl.sync("a2 ready");
		FT_POST(msend(ep, buf.data(), medium, buf.desc(), s, kTagA2, &c2));
		ep.tx().wait(&c2, "A' first send");
		FT_POST(msend(ep, buf.data() + medium, lcts, buf.desc(), s, kTagA2 + 1, &c2));
		ep.tx().wait(&c2, "A' second send");
		ctl.sync("a2 sent");
		ep.rx().wait(&c1, "S's message to A'");
		FT_EXPECT_PATTERN(buf.data() + kFromA, kEager, 33, 0, "S's message to A'");
		ctl.sync("end");
		return;
	}

	/* Step 1: one message each way. */
	FT_POST(mrecv(ep, buf.data(), medium, buf.desc(), s, kTagB, &c1));
	ctl.sync("hello posted");
	ep.rx().wait(&c1, "S's hello");
	FT_EXPECT_PATTERN(buf.data(), medium, 10, 0, "S's hello");
	fill_pattern(buf.data(), medium, 11 + uint32_t(role));
	FT_POST(msend(ep, buf.data(), medium, buf.desc(), s, kTagB, &c2));
	ep.tx().wait(&c2, "hello to S");
	ctl.sync("hello done");

	if (role == 1) {
		/* Step 2: a long message S gets the start of, a marker after it, then silence. */
		if (!direct()) {
			fill_pattern(buf.data(), kFromA, 20);
			FT_POST(fi_tsend(ep, buf.data(), kFromA, buf.desc(), s, kTagFromA, &c1));
			FT_POST(fi_tsend(ep, buf.data() + kFromA, 8, buf.desc(), s, kTagMarker, &c2));
		}
		ctl_progress = false; /* from now on this process never reads its CQs */
		ctl.notify("a sent");
		ctl.await("never"); /* killed before */
		FT_FAIL("A was not killed");
	}

	/* B, step 5: S's messages, verified, then a big one back, and S reads our region. */
	FT_POST(mrecv(ep, buf.data(), medium, buf.desc(), s, kTagB + 1, &c1));
	FT_POST(mrecv(ep, buf.data() + kMedium, lcts, buf.desc(), s, kTagB + 2, &c2));
	ctl.sync("b posted");
	ep.rx().wait(&c1, "S's first message");
	ep.rx().wait(&c2, "S's second message");
	FT_EXPECT_PATTERN(buf.data(), medium, 41, 0, "S's first message");
	FT_EXPECT_PATTERN(buf.data() + kMedium, lcts, 42, 0, "S's second message");
	fill_pattern(buf.data(), big, 43);
	FT_POST(msend(ep, buf.data(), big, buf.desc(), s, kTagB + 3, &c1));
	ep.tx().wait(&c1, "the message to S");
	ctl.sync("b done");
	ctl.sync("end");
}

/* ------------------------------------------------------------------ S */

void survivor()
{
	Fabric fab(caps());
	FT_CHECK(fab.is_efa(), "ft_peer_death needs the efa provider (it kills a peer on its software device)");
	Endpoint ep(fab, ep_spec(fab));
	const long interval = direct() ? 0 : env_ms("FI_EFA_PEER_PROBE_INTERVAL", 1000);
	const long timeout = env_ms("EFASIM_TIMEOUT_MS", 5000);
	const long bound = interval + interval / 4 + timeout + 1000;
	note("fabric %s; bound: FI_EFA_PEER_PROBE_INTERVAL %ld ms * 5/4 + EFASIM_TIMEOUT_MS %ld ms + 1 s = %ld ms",
	     fab.info()->fabric_attr->name, interval, timeout, bound);
	const size_t medium = msz(fab, kMedium), lcts = msz(fab, kLongCts), big = msz(fab, kLong);

	Ctl ca; /* PORT: A */
	fi_addr_t a = ca.exchange_names(fab, ep);
	const EfaName a_name = efa_name(ca.peer_name());
	RemoteMr a_mr = ca.recv_mr();
	Ctl cb; /* PORT: B */
	fi_addr_t b = cb.exchange_names(fab, ep);
	RemoteMr b_mr = cb.recv_mr();

	Buffer buf(fab, 4 * kLong);
	Buffer rx(fab, kFromA + 64);
	Buffer res(fab, 64);
	fi_context2 c1{}, c2{};

	/* Step 1 with both. */
	for (int i = 0; i < 2; i++) {
		Ctl &c = i ? cb : ca;
		fi_addr_t to = i ? b : a;
		fill_pattern(buf.data(), medium, 10);
		FT_POST(mrecv(ep, rx.data(), medium, rx.desc(), to, kTagB, &c2));
		c.sync("hello posted");
		FT_POST(msend(ep, buf.data(), medium, buf.desc(), to, kTagB, &c1));
		ep.tx().wait(&c1, "hello");
		ep.rx().wait(&c2, "a peer's hello");
		FT_EXPECT_PATTERN(rx.data(), medium, 11 + uint32_t(i + 1), 0, "a peer's hello");
		c.sync("hello done");
	}

	std::vector<Pending> ops;
	ops.reserve(16);
	auto add = [&](const char *what, bool is_rx = false) -> Pending & {
		ops.push_back(Pending{what, is_rx});
		return ops.back();
	};
	if (!direct()) {
		/* Step 2: A's long message, matched and partly received. */
		Pending &partial = add("receive of A's 512 KiB message (partly received)", true);
		FT_POST(fi_trecv(ep, rx.data(), kFromA, rx.desc(), a, kTagFromA, 0, &partial.ctx));
		FT_POST(fi_trecv(ep, rx.data() + kFromA, 8, rx.desc(), a, kTagMarker, 0, &c1));
		ca.await("a sent");
		ep.rx().wait(&c1, "A's marker (after its long message)");

		/* Step 3: operations that wait for A's answer. */
		fill_pattern(buf.data(), 4 * kLong, 50);
		Pending &eager = add("eager send, FI_DELIVERY_COMPLETE");
		FT_POST(tsend_dc(ep, buf, 0, kEager, a, kTagToA, FI_DELIVERY_COMPLETE | FI_COMPLETION, &eager.ctx));
		Pending &med = add("medium send, FI_DELIVERY_COMPLETE");
		FT_POST(tsend_dc(ep, buf, 0, kMedium, a, kTagToA, FI_DELIVERY_COMPLETE | FI_COMPLETION, &med.ctx));
		Pending &lc = add("256 KiB send (long-CTS)");
		FT_POST(fi_tsend(ep, buf.data(), kLongCts, buf.desc(), a, kTagToA, &lc.ctx));
		Pending &lread = add(rma_emulated() ? "2 MiB send (long-CTS)" : "2 MiB send (read-based)");
		FT_POST(fi_tsend(ep, buf.data() + kLong, kLong, buf.desc(), a, kTagToA, &lread.ctx));
		uint64_t one = 1;
		Pending &fetch = add("fi_fetch_atomic");
		FT_POST(fi_fetch_atomic(ep, &one, 1, nullptr, res.data(), res.desc(), a, a_mr.at(0), a_mr.key,
					 FI_UINT64, FI_SUM, &fetch.ctx));
		Pending &atom = add("fi_atomic");
		FT_POST(fi_atomic(ep, &one, 1, nullptr, a, a_mr.at(8), a_mr.key, FI_UINT64, FI_SUM, &atom.ctx));
		if (rma_emulated()) {
			Pending &w = add("fi_write (emulated)");
			FT_POST(fi_write(ep, buf.data(), kRma, buf.desc(), a, a_mr.at(4096), a_mr.key, &w.ctx));
			Pending &r = add("fi_read (emulated)");
			FT_POST(fi_read(ep, buf.data() + 2 * kLong, kRma, buf.desc(), a, a_mr.at(4096), a_mr.key,
					 &r.ctx));
		}
		/* Nothing of it can complete while A is silent. */
		ep.tx().expect_empty("no operation to the silent A completes");
		ep.rx().expect_empty("no receive from the silent A completes");
	} else {
		ca.await("a sent");
	}

	/* Step 4: kill A. */
	printf("KILL A\n");
	fflush(stdout);
	ca.await_close();
	const auto dead = Clock::now();
	note("A is dead (its control channel closed)");
	size_t fast = 0;
	if (direct() || !rma_emulated()) {
		/* Operations on the device to a peer that is gone. */
		Pending &w = add("fi_write (device) after the death");
		ssize_t rc = fi_write(ep, buf.data(), kRma, buf.desc(), a, a_mr.at(4096), a_mr.key, &w.ctx);
		Pending &r = add("fi_read (device) after the death");
		ssize_t rr = fi_read(ep, buf.data() + 2 * kLong, kRma, buf.desc(), a, a_mr.at(4096), a_mr.key, &r.ctx);
		std::vector<std::pair<Pending *, ssize_t>> posted{{&w, rc}, {&r, rr}};
		if (direct()) {
			Pending &sd = add("fi_send after the death");
			posted.emplace_back(&sd, fi_send(ep, buf.data(), medium, buf.desc(), a, &sd.ctx));
		}
		/* Known dead already: refused at once, which is as good. */
		for (auto [p, v] : posted) {
			if (v == -FI_EHOSTUNREACH) {
				p->done = true;
				fast++;
				note("%s: refused at once (-FI_EHOSTUNREACH)", p->what);
			} else {
				FT_CHECK(v == 0, "%s: %s", p->what, fi_strerror(int(-v)));
			}
		}
	}
	size_t left = ops.size() - fast;
	long worst = 0;
	while (left) {
		const long ms = long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - dead).count());
		FT_CHECK(ms <= bound + 2000, "%zu operations to the dead A still pending after %ld ms", left, ms);
		for (Cq *cq : {&ep.tx(), &ep.rx()}) {
			std::optional<Entry> e = cq->poll();
			if (!e)
				continue;
			Pending *p = nullptr;
			for (auto &o : ops)
				if (&o.ctx == e->ctx)
					p = &o;
			FT_CHECK(p && !p->done, "%s: an entry of no pending operation: %s", cq->name(),
				 e->describe().c_str());
			FT_CHECK(e->error, "%s: completed without error after A's death", p->what);
			FT_CHECK(e->err == FI_EHOSTUNREACH, "%s: %s, expected FI_EHOSTUNREACH", p->what,
				 e->describe().c_str());
			note("%-50s failed after %5ld ms: %s", p->what, ms, fi_strerror(e->err));
			worst = std::max(worst, ms);
			p->done = true;
			left--;
		}
	}
	FT_CHECK(worst <= bound, "the last operation failed %ld ms after A's death, beyond the %ld ms bound", worst,
		 bound);
	note("all %zu operations failed within %ld ms of A's death (bound %ld ms)", ops.size(), worst, bound);
	ssize_t rc;
	if (!direct()) {
		rc = fi_tsend(ep, buf.data(), kEager, buf.desc(), a, kTagToA, &c1);
		FT_CHECK(rc == -FI_EHOSTUNREACH, "a send to the dead A returned %zd, expected -FI_EHOSTUNREACH", rc);
	}

	/* Step 5: remove A, go on with B. */
	fab.remove(a);
	rc = msend(ep, buf.data(), kEager, buf.desc(), a, kTagToA, &c1);
	FT_CHECK(rc == -FI_EINVAL, "a send to the removed A returned %zd, expected -FI_EINVAL", rc);
	fill_pattern(buf.data(), medium, 41);
	fill_pattern(buf.data() + kMedium, lcts, 42);
	Buffer bigbuf(fab, kLong);
	FT_POST(mrecv(ep, bigbuf.data(), big, bigbuf.desc(), b, kTagB + 3, &c2));
	cb.sync("b posted");
	FT_POST(msend(ep, buf.data(), medium, buf.desc(), b, kTagB + 1, &c1));
	ep.tx().wait(&c1, "first message to B");
	FT_POST(msend(ep, buf.data() + kMedium, lcts, buf.desc(), b, kTagB + 2, &c1));
	ep.tx().wait(&c1, "second message to B");
	ep.rx().wait(&c2, "B's message");
	FT_EXPECT_PATTERN(bigbuf.data(), big, 43, 0, "B's message");
	FT_POST(fi_read(ep, buf.data(), kRma, buf.desc(), b, b_mr.at(0), b_mr.key, &c1));
	ep.tx().wait(&c1, "fi_read of B's region");
	FT_EXPECT_PATTERN(buf.data(), kRma, 102, 0, "B's region, read");
	cb.sync("b done");
	note("B: messages of %zu, %zu and %zu bytes and an RMA read verified after A's removal", medium, lcts, big);

	/* Step 6: A' on A's QP number. */
	printf("QPN %u\n", unsigned(a_name.qpn));
	fflush(stdout);
	Ctl c3; /* PORT: A' */
	fi_addr_t a2 = c3.exchange_names(fab, ep);
	const EfaName a2_name = efa_name(c3.peer_name());
	(void)c3.recv_mr();
	const bool same_qp = !memcmp(a2_name.gid, a_name.gid, 16) && a2_name.qpn == a_name.qpn;
	FT_CHECK(same_qp, "A' got QPN %u, A had %u (EFASIM_FIRST_QPN not honoured?)", a2_name.qpn, a_name.qpn);
	FT_CHECK(a2_name.qkey != a_name.qkey, "A' has A's QKEY %#x", a_name.qkey);
	note("A' has A's GID and QPN %u, QKEY %#x (A's was %#x): fi_addr %lu (A's was %lu)", a2_name.qpn,
	     a2_name.qkey, a_name.qkey, (unsigned long)a2, (unsigned long)a);
	FT_POST(mrecv(ep, rx.data(), medium, rx.desc(), FI_ADDR_UNSPEC, kTagA2, &c1));
	FT_POST(mrecv(ep, bigbuf.data(), lcts, bigbuf.desc(), FI_ADDR_UNSPEC, kTagA2 + 1, &c2));
	c3.sync("a2 ready");
	Entry e1 = ep.rx().wait(&c1, "A's' first message");
	Entry e2 = ep.rx().wait(&c2, "A's' second message");
	FT_CHECK(e1.len == medium && e2.len == lcts, "A' messages of %zu and %zu bytes", e1.len, e2.len);
	FT_EXPECT_PATTERN(rx.data(), medium, 31, 0, "A's' first message");
	FT_EXPECT_PATTERN(bigbuf.data(), lcts, 32, 0, "A's' second message");
	fill_pattern(buf.data(), kEager, 33);
	FT_POST(msend(ep, buf.data(), kEager, buf.desc(), a2, kTagA2 + 2, &c1));
	ep.tx().wait(&c1, "the message to A'");
	c3.sync("a2 sent");
	ep.tx().expect_empty("nothing else on the transmit CQ");
	ep.rx().expect_empty("nothing of A delivered");
	note("A' exchanged verified messages as a new peer; nothing stale delivered");
	cb.sync("end");
	c3.sync("end");
}

} // namespace

int main(int argc, char **argv)
{
	const int role = int(take_number(argc, argv, "-R", 0));
	parse_options(argc, argv, "a peer killed mid-transfer: bounded failure, fi_av_remove, QPN reuse "
				  "(run by run_peer_failure.sh)");
	if (opts.server)
		survivor();
	else if (role >= 1 && role <= 3)
		peer(role);
	else
		FT_FAIL("a client needs -R 1 (A), 2 (B) or 3 (A')");
	return 0;
}
