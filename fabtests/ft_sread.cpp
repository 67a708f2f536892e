/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_sread: blocking waits on the server's receive CQ.
 *
 * With FI_WAIT_UNSPEC:
 *   1. wake-up: the server posts a receive, tells the client, and blocks in fi_cq_sread
 *      (20 s timeout); it must return the message's entry, well before the timeout;
 *   2. timeout: fi_cq_sread with nothing to come returns -FI_EAGAIN after its 300 ms;
 *   3. fi_cq_signal: another thread blocks in fi_cq_sread (15 s); fi_cq_signal must
 *      make it return -FI_EAGAIN without an entry, well before its timeout.
 * With FI_WAIT_FD (a new endpoint):
 *   4. fi_control(FI_GETWAIT) gives a file descriptor; with nothing to come, waiting on
 *      it (fi_trywait, then poll) yields no completion; then the server posts a
 *      receive, tells the client, and waits only through fi_trywait + poll() on the fd
 *      until the message's entry can be read.
 */
#include "common/ft_oob.h"

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

using namespace ft;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t len = 500;

/* The server's receive CQ is read only by the calls under test. */
CqSpec waiting_rx(fi_wait_obj wait)
{
	CqSpec s;
	s.wait = wait;
	s.progress = false;
	return s;
}

/* The client: one message per round on request. */
void client_round(const Fabric &fab, Oob &oob, Endpoint &ep, fi_addr_t peer, uint32_t seed,
		  const char *step)
{
	Buffer buf(fab, len);
	fill_pattern(buf.data(), len, seed);
	fi_context2 ctx{};
	oob.await(step); /* the server is about to block */
	FT_POST(fi_send(ep, buf.data(), len, buf.desc(), peer, &ctx));
	ep.tx().wait(&ctx, step);
	oob.sync("received");
}

void check_entry(Cq &cq, const fi_cq_data_entry &e, void *ctx, const Buffer &buf, uint32_t seed)
{
	Completion c = cq.convert(&e, FI_ADDR_NOTAVAIL);
	FT_CHECK(c.ctx == ctx && c.len == len && (c.flags & FI_RECV), "woken with %s",
		 c.describe().c_str());
	FT_EXPECT_PATTERN(buf.data(), len, seed, 0, "the message that woke the wait");
}

void sread_rounds(const Fabric &fab, Oob &oob, Endpoint &ep)
{
	Cq &rx = ep.rx();
	Buffer buf(fab, len);
	fi_context2 ctx{};
	fi_cq_data_entry e{};

	/* 1. woken by the message */
	FT_POST(fi_recv(ep, buf.data(), len, buf.desc(), FI_ADDR_UNSPEC, &ctx));
	oob.notify("posted 1"); /* and block at once: the message comes after a round trip */
	auto start = Clock::now();
	ssize_t rc = fi_cq_sread(rx.get(), &e, 1, nullptr, 20000);
	double ms = ms_since(start);
	if (rc == -FI_EAVAIL)
		FT_FAIL("fi_cq_sread: %s", rx.read_error().describe().c_str());
	FT_CHECK(rc == 1, "fi_cq_sread returned %zd (%s) after %.0f ms", rc,
		 fi_strerror(int(-rc)), ms);
	FT_CHECK(ms < 15000, "fi_cq_sread took %.0f ms to see the message", ms);
	check_entry(rx, e, &ctx, buf, 900);
	oob.sync("received");
	note("fi_cq_sread returned the message's entry after %.1f ms", ms);

	/* 2. nothing comes: -FI_EAGAIN after the timeout */
	start = Clock::now();
	rc = fi_cq_sread(rx.get(), &e, 1, nullptr, 300);
	ms = ms_since(start);
	FT_CHECK(rc == -FI_EAGAIN, "fi_cq_sread with nothing to come returned %zd (%s)", rc,
		 rc < 0 ? fi_strerror(int(-rc)) : "an entry");
	FT_CHECK(ms >= 250 && ms < 10000, "a 300 ms fi_cq_sread returned after %.0f ms", ms);

	/* 3. fi_cq_signal wakes a thread blocked in fi_cq_sread */
	std::atomic<bool> started{false};
	std::mutex m;
	std::condition_variable cv;
	bool done = false;
	ssize_t trc = 0;
	double tms = 0;
	std::thread t([&] {
		fi_cq_data_entry te{};
		started = true;
		auto s = Clock::now();
		ssize_t r = fi_cq_sread(rx.get(), &te, 1, nullptr, 15000);
		std::lock_guard<std::mutex> g(m);
		trc = r;
		tms = ms_since(s);
		done = true;
		cv.notify_all();
	});
	Deadline deadline;
	while (!started && !deadline.expired())
		std::this_thread::yield();
	/* Signal until it returns: a signal sent just before the thread blocks may be
	 * consumed by a provider that resets its wait object on entry. */
	std::unique_lock<std::mutex> lk(m);
	while (!done && !deadline.expired()) {
		FT_CALL(fi_cq_signal(rx.get()));
		cv.wait_for(lk, std::chrono::milliseconds(100));
	}
	lk.unlock();
	t.join();
	/* fi_cq(3) does not say what the woken call returns: libfabric's own CQs (and ours)
	 * return -FI_EAGAIN, upstream's efa provider -FI_ECANCELED. Never an entry. */
	FT_CHECK(trc == -FI_EAGAIN || trc == -FI_ECANCELED, "fi_cq_sread woken by fi_cq_signal returned %zd (%s)", trc,
		 trc < 0 ? fi_strerror(int(-trc)) : "an entry");
	FT_CHECK(tms < 10000, "fi_cq_signal woke fi_cq_sread only after %.0f ms", tms);
	note("fi_cq_sread timed out after its 300 ms; fi_cq_signal woke a blocked fi_cq_sread");
}

void fd_round(const Fabric &fab, Oob &oob, Endpoint &ep)
{
	Cq &rx = ep.rx();
	int fd = -1;
	FT_CALL(fi_control(&rx.get()->fid, FI_GETWAIT, &fd));
	FT_CHECK(fd >= 0, "FI_GETWAIT gave fd %d", fd);
	fid *fids[1] = {&rx.get()->fid};
	fi_cq_data_entry e{};

	/* Nothing to come: the fd may wake spuriously, but no completion may appear. */
	if (fi_trywait(fab.fabric(), fids, 1) == FI_SUCCESS) {
		pollfd p{fd, POLLIN, 0};
		FT_CHECK(poll(&p, 1, 200) >= 0, "poll on the CQ's fd failed");
	}
	ssize_t rc = fi_cq_read(rx.get(), &e, 1);
	FT_CHECK(rc == -FI_EAGAIN, "an idle FI_WAIT_FD CQ read returned %zd", rc);

	Buffer buf(fab, len);
	fi_context2 ctx{};
	FT_POST(fi_recv(ep, buf.data(), len, buf.desc(), FI_ADDR_UNSPEC, &ctx));
	oob.notify("posted fd");
	Deadline deadline;
	int wakeups = 0;
	for (;;) {
		/* fi_trywait says whether blocking is safe; -FI_EAGAIN: read first. */
		int tw = fi_trywait(fab.fabric(), fids, 1);
		if (tw == FI_SUCCESS) {
			pollfd p{fd, POLLIN, 0};
			int n = poll(&p, 1, deadline.left_ms());
			FT_CHECK(n >= 0, "poll on the CQ's fd failed");
			wakeups += n;
		} else {
			FT_CHECK(tw == -FI_EAGAIN, "fi_trywait returned %d (%s)", tw,
				 fi_strerror(-tw));
		}
		rc = fi_cq_read(rx.get(), &e, 1);
		if (rc == 1)
			break;
		if (rc == -FI_EAVAIL)
			FT_FAIL("FI_WAIT_FD CQ: %s", rx.read_error().describe().c_str());
		FT_CHECK(rc == -FI_EAGAIN, "fi_cq_read returned %zd (%s)", rc,
			 fi_strerror(int(-rc)));
		FT_CHECK(!deadline.expired(), "no completion through the CQ's fd after %d s",
			 opts.timeout_s);
	}
	check_entry(rx, e, &ctx, buf, 901);
	oob.sync("received");
	note("FI_WAIT_FD: the message's entry was read after %d poll wake-up(s)", wakeups);
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "fi_cq_sread, fi_cq_signal and FI_WAIT_FD wake-ups");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV);
	Oob oob;
	{
		Endpoint ep(fab, {}, opts.server ? waiting_rx(FI_WAIT_UNSPEC) : CqSpec{});
		fi_addr_t peer = oob.exchange_names(fab, ep);
		if (opts.server)
			sread_rounds(fab, oob, ep);
		else
			client_round(fab, oob, ep, peer, 900, "posted 1");
		oob.sync("unspec done");
	}
	{
		Endpoint ep(fab, {}, opts.server ? waiting_rx(FI_WAIT_FD) : CqSpec{});
		fi_addr_t peer = oob.exchange_names(fab, ep);
		if (opts.server)
			fd_round(fab, oob, ep);
		else
			client_round(fab, oob, ep, peer, 901, "posted fd");
		oob.sync("fd done");
	}
	oob.sync("end");
	return 0;
}
