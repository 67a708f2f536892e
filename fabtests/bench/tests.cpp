/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The tests: ping-pong latency, streaming (bandwidth and message rate), RMA bandwidth.
 *
 * No test depends on message ordering, and no message is ever sent before the receive
 * that takes it is posted: an RDM provider without an unexpected-message protocol (such
 * as efa-direct, where a send to a queue without a receive is an RNR error) runs them
 * unchanged.
 */
#include "bench.h"

#include <algorithm>
#include <cstring>

namespace bench {

namespace {

enum Salt : uint32_t { Ping = 1, Pong = 2, Stream = 3, Write = 4, Read = 5 };
constexpr uint32_t max_tx_out = 8;	/* ping-pong: send completions not yet reaped */
constexpr uint32_t ctl_posted_max = 4;	/* stream: credit receives posted by the sender */

[[noreturn]] void unexpected(const Completion &c, const char *where)
{
	throw Error(std::string("unexpected ") + kind_name(c.kind) + " completion in " + where);
}

void check_len(size_t got, size_t want, const char *what)
{
	if (got != want)
		throw Error(std::string(what) + ": received " + std::to_string(got) +
			    " bytes, expected " + std::to_string(want));
}

/* Reap completions of sends until at most `keep` are outstanding. */
void reap_tx(Fabric &f, uint64_t &tx_out, uint64_t keep, Kind k, const char *where)
{
	Completion c[16];
	while (tx_out > keep) {
		int n = f.poll(c, 16);
		for (int i = 0; i < n; i++) {
			if (c[i].kind != k)
				unexpected(c[i], where);
			tx_out--;
		}
	}
}

void send_ready(Ctl &ctl)
{
	CtlMsg m;
	m.type = CtlType::Ready;
	ctl.send(m);
}

} // namespace

/* ------------------------------------------------------------------ ping-pong */
namespace {

/* Poll until the one receive posted completes; reap send completions meanwhile. */
size_t wait_rx(Fabric &f, uint64_t &tx_out)
{
	Completion c[16];
	size_t got = SIZE_MAX;
	while (got == SIZE_MAX) {
		int n = f.poll(c, 16);
		for (int k = 0; k < n; k++) {
			if (c[k].kind == TxData)
				tx_out--;
			else if (c[k].kind == RxData)
				got = c[k].len;
			else
				unexpected(c[k], "ping-pong");
		}
	}
	return got;
}

Error pingpong_state(const Error &e, const char *side, size_t size, uint64_t i, uint64_t n)
{
	return annotate(e, std::string("ping-pong ") + side + ", size " + std::to_string(size) +
				   ": iteration " + std::to_string(i) + "/" + std::to_string(n));
}

} // namespace

RunResult pingpong_client(Fabric &f, Bufs &b, size_t size, uint64_t iters, bool v)
{
	RunResult r;
	r.rtt_us.reserve(iters);
	if (v)
		fill(b.tx(), size, Ping);
	uint64_t tx_out = 0, i = 0;
	const auto start = Clock::now();
	try {
		for (; i < iters; i++) {
			if (v && i == 0)
				std::memset(b.rx(0), 0, size);
			f.post_recv(b.rx(0), size, b.msg.desc, RxData, 0);	/* before the ping */
			const auto t0 = Clock::now();
			tx_out += f.post_send(b.tx(), size, b.msg.desc, TxData, 0);
			size_t got = wait_rx(f, tx_out);
			r.rtt_us.push_back(
				std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
			if (v && i == 0) {
				check_len(got, size, "pong");
				verify(b.rx(0), size, Pong, "pong");
			}
			if (tx_out >= max_tx_out)
				reap_tx(f, tx_out, max_tx_out - 1, TxData, "ping-pong");
		}
		reap_tx(f, tx_out, 0, TxData, "ping-pong");
	} catch (const Error &e) {
		throw pingpong_state(e, "client", size, i, iters);
	}
	r.seconds = seconds_since(start);
	return r;
}

void pingpong_server(Fabric &f, Bufs &b, Ctl &ctl, size_t size, uint64_t iters, bool v)
{
	if (v) {
		fill(b.tx(), size, Pong);
		std::memset(b.rx(0), 0, size);
	}
	f.post_recv(b.rx(0), size, b.msg.desc, RxData, 0);
	send_ready(ctl);
	uint64_t tx_out = 0, i = 0;
	try {
		for (; i < iters; i++) {
			size_t got = wait_rx(f, tx_out);
			if (v && i == 0) {
				check_len(got, size, "ping");
				verify(b.rx(0), size, Ping, "ping");
			}
			if (i + 1 < iters)	/* the next ping's receive, before this pong */
				f.post_recv(b.rx(0), size, b.msg.desc, RxData, 0);
			tx_out += f.post_send(b.tx(), size, b.msg.desc, TxData, 0);
			if (tx_out >= max_tx_out)
				reap_tx(f, tx_out, max_tx_out - 1, TxData, "ping-pong");
		}
		reap_tx(f, tx_out, 0, TxData, "ping-pong");
	} catch (const Error &e) {
		throw pingpong_state(e, "server", size, i, iters);
	}
}

/* ------------------------------------------------------------------ streaming
 * Credit flow control: the receiver keeps 2*w receives posted (never more than the
 * messages still to come) and, after each w messages it has taken and re-posted, sends
 * an 8-byte credit; the last credit is the final ack. The sender keeps at most w sends
 * outstanding (by completions) and never runs more than 2*w messages ahead of the
 * credits it has reaped, so every message finds a posted receive. Timing runs from the
 * first send to the final ack.
 */
RunResult stream_client(Fabric &f, Bufs &b, size_t size, uint64_t iters, uint32_t w, bool v)
{
	const uint64_t nctl = (iters + w - 1) / w;
	uint64_t ctl_posted = 0;
	for (uint32_t s = 0; s < ctl_posted_max && ctl_posted < nctl; s++, ctl_posted++)
		f.post_recv(b.ctl_rx(s), Bufs::ctl_len, b.msg.desc, RxCtl, s);
	if (v)
		fill(b.tx(), size, Stream);

	RunResult r;
	uint64_t sent = 0, credits = 0, tx_out = 0;
	Completion c[16];
	const auto t0 = Clock::now();
	try {
		while (credits < nctl) {
			while (sent < iters && sent < (credits + 2) * w && tx_out < w) {
				tx_out += f.post_send(b.tx(), size, b.msg.desc, TxData, 0);
				sent++;
			}
			int n = f.poll(c, 16);
			for (int k = 0; k < n; k++) {
				if (c[k].kind == TxData) {
					tx_out--;
				} else if (c[k].kind == RxCtl) {
					credits++;
					if (ctl_posted < nctl) {
						f.post_recv(b.ctl_rx(c[k].slot), Bufs::ctl_len,
							    b.msg.desc, RxCtl, c[k].slot);
						ctl_posted++;
					}
				} else {
					unexpected(c[k], "stream sender");
				}
			}
		}
		r.seconds = seconds_since(t0);
		reap_tx(f, tx_out, 0, TxData, "stream sender");
	} catch (const Error &e) {
		throw annotate(e, "stream sender, size " + std::to_string(size) + ": sent " +
				       std::to_string(sent) + "/" + std::to_string(iters) +
				       ", credits " + std::to_string(credits) + "/" +
				       std::to_string(nctl) + ", sends outstanding " +
				       std::to_string(tx_out));
	}
	return r;
}

void stream_server(Fabric &f, Bufs &b, Ctl &ctl, size_t size, uint64_t iters, uint32_t w,
		   bool v)
{
	if (w == 0 || 2 * w > b.rx_slots)
		throw Error("window " + std::to_string(w) + " exceeds the receive slots");
	uint64_t posted = 0;
	for (uint32_t s = 0; s < 2 * w && posted < iters; s++, posted++) {
		if (v)
			std::memset(b.rx(s), 0, size);
		f.post_recv(b.rx(s), size, b.msg.desc, RxData, s);
	}
	std::memset(b.ctl_tx(), 0x5a, Bufs::ctl_len);
	send_ready(ctl);

	uint64_t recvd = 0, tx_out = 0;
	Completion c[16];
	try {
		while (recvd < iters) {
			int n = f.poll(c, 16);
			for (int k = 0; k < n; k++) {
				if (c[k].kind == TxCtl) {
					tx_out--;
					continue;
				}
				if (c[k].kind != RxData)
					unexpected(c[k], "stream receiver");
				recvd++;
				char *buf = b.rx(c[k].slot);
				if (v) {
					check_len(c[k].len, size, "stream");
					verify(buf, size, Stream, "stream");
					std::memset(buf, 0, size);
				}
				if (posted < iters) {
					f.post_recv(buf, size, b.msg.desc, RxData, c[k].slot);
					posted++;
				}
				if (recvd % w == 0 || recvd == iters)
					tx_out += f.post_send(b.ctl_tx(), Bufs::ctl_len, b.msg.desc,
							      TxCtl, 0);
			}
		}
		reap_tx(f, tx_out, 0, TxCtl, "stream receiver");
	} catch (const Error &e) {
		throw annotate(e, "stream receiver, size " + std::to_string(size) + ": received " +
				       std::to_string(recvd) + "/" + std::to_string(iters) +
				       ", receives posted " + std::to_string(posted) +
				       ", credit sends outstanding " + std::to_string(tx_out));
	}
}

/* ------------------------------------------------------------------ RMA
 * RMA write and read bandwidth: the client keeps `w` operations outstanding on one local
 * buffer against one registered buffer of the server, which stays passive (it only polls
 * its completion queue, which drives progress for FI_PROGRESS_MANUAL providers). At the
 * end the client sends a message and the server answers it (the final sync); timing runs
 * from the first operation to that answer.
 */
RunResult rma_client(Fabric &f, Bufs &b, bool write, size_t size, uint64_t iters, uint32_t w,
		     bool v, uint64_t raddr, uint64_t key)
{
	if (size > b.rma.len)
		throw Error("RMA size " + std::to_string(size) + " exceeds the RMA buffer");
	RunResult r;
	char *local = b.rma.buf;
	void *desc = b.rma.desc;
	f.post_recv(b.ctl_rx(0), Bufs::ctl_len, b.msg.desc, RxCtl, 0);	/* the final ack */
	if (v) {
		if (write)
			fill(local, size, Write);
		else
			std::memset(local, 0, size);
	}

	Completion c[16];
	uint64_t issued = 0, done = 0, out = 0;
	const auto t0 = Clock::now();
	/* The server checks written data when the sync message arrives. Without send-after-
	 * write ordering, only FI_DELIVERY_COMPLETE makes the data visible by then. */
	if (v && write && iters && !(f.msg_order & FI_ORDER_SAW)) {
		int ret = f.post_rma(true, local, size, desc, raddr, key, FI_DELIVERY_COMPLETE);
		if (ret) {
			r.note = std::string("FI_DELIVERY_COMPLETE refused (") + fi_strerror(-ret) +
				 "): written data checked after a transmit completion";
			f.post_rma(true, local, size, desc, raddr, key);
		}
		issued = out = 1;
	}
	try {
		while (done < iters) {
			while (issued < iters && out < w) {
				f.post_rma(write, local, size, desc, raddr, key);
				issued++;
				out++;
			}
			int n = f.poll(c, 16);
			for (int k = 0; k < n; k++) {
				if (c[k].kind != RmaOp)
					unexpected(c[k], "RMA initiator");
				done++;
				out--;
			}
		}
	} catch (const Error &e) {
		throw annotate(e, std::string("RMA ") + (write ? "write" : "read") + ", size " +
					  std::to_string(size) + ": completed " + std::to_string(done) +
					  "/" + std::to_string(iters) + ", outstanding " +
					  std::to_string(out));
	}
	if (v && !write)
		verify(local, size, Read, "RMA read");

	std::memset(b.ctl_tx(), 0x5a, Bufs::ctl_len);
	uint64_t tx_out = f.post_send(b.ctl_tx(), Bufs::ctl_len, b.msg.desc, TxCtl, 0);
	bool acked = false;
	while (!acked || tx_out) {
		int n = f.poll(c, 16);
		for (int k = 0; k < n; k++) {
			if (c[k].kind == TxCtl) {
				tx_out--;
			} else if (c[k].kind == RxCtl) {
				acked = true;
				r.seconds = seconds_since(t0);
			} else {
				unexpected(c[k], "RMA sync");
			}
		}
	}
	return r;
}

void rma_server(Fabric &f, Bufs &b, Ctl &ctl, bool write, size_t size, bool v)
{
	if (size > b.rma.len)
		throw Error("RMA size " + std::to_string(size) + " exceeds the RMA buffer");
	char *target = b.rma.buf;
	if (v) {
		if (write)
			std::memset(target, 0, size);
		else
			fill(target, size, Read);
	}
	f.post_recv(b.ctl_rx(0), Bufs::ctl_len, b.msg.desc, RxCtl, 0);	/* the sync */
	CtlMsg m;
	m.type = CtlType::Ready;
	m.a = b.rma.raddr;
	m.b = b.rma.key;
	ctl.send(m);

	Completion c[16];
	bool synced = false;
	while (!synced) {
		int n = f.poll(c, 16);
		for (int k = 0; k < n; k++) {
			if (c[k].kind != RxCtl)
				unexpected(c[k], "RMA target");
			synced = true;
		}
	}
	if (v && write)
		verify(target, size, Write, "RMA write");
	std::memset(b.ctl_tx(), 0x5a, Bufs::ctl_len);
	uint64_t tx_out = f.post_send(b.ctl_tx(), Bufs::ctl_len, b.msg.desc, TxCtl, 0);
	while (tx_out) {
		int n = f.poll(c, 16);
		for (int k = 0; k < n; k++) {
			if (c[k].kind != TxCtl)
				unexpected(c[k], "RMA target");
			tx_out--;
		}
	}
}

} // namespace bench
