/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The out-of-band control channel (a socketpair between the two processes), the data
 * pattern, the registered buffers and the per-measurement hand-shake.
 */
#include "bench.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace bench {

const char *kind_name(uint32_t k)
{
	switch (k) {
	case TxData: return "data send";
	case RxData: return "data receive";
	case TxCtl: return "control send";
	case RxCtl: return "control receive";
	case RmaOp: return "RMA";
	}
	return "unknown";
}

/* ------------------------------------------------------------------ control channel */
void CtlMsg::set_data(const void *p, size_t n)
{
	len = uint32_t(std::min(n, sizeof data));
	std::memcpy(data, p, len);
}

void Ctl::send(const CtlMsg &m)
{
	const char *p = reinterpret_cast<const char *>(&m);
	size_t done = 0;
	while (done < sizeof m) {
		ssize_t r = ::send(fd_, p + done, sizeof m - done, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			throw Error("control channel: peer process exited", false, true);
		done += size_t(r);
	}
}

void Ctl::throw_peer_error(const CtlMsg &m)
{
	throw Error(m.data_str(), m.a != 0, false);
}

CtlMsg Ctl::recv(CtlType expect, Fabric *progress)
{
	if (progress) {
		pollfd pfd{fd_, POLLIN, 0};
		while (::poll(&pfd, 1, 0) == 0)
			progress->progress();
	}
	CtlMsg m;
	char *p = reinterpret_cast<char *>(&m);
	size_t done = 0;
	while (done < sizeof m) {
		ssize_t r = ::recv(fd_, p + done, sizeof m - done, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			throw Error("peer process exited", false, true);
		done += size_t(r);
	}
	if (m.type == CtlType::Error)
		throw_peer_error(m);
	if (expect != CtlType{} && m.type != expect)
		throw Error("control channel: expected message " + std::to_string(uint32_t(expect)) +
			    ", got " + std::to_string(uint32_t(m.type)));
	return m;
}

void Ctl::check_peer()
{
	pollfd pfd{fd_, POLLIN, 0};
	if (::poll(&pfd, 1, 0) <= 0)
		return;
	CtlType t{};
	ssize_t r = ::recv(fd_, &t, sizeof t, MSG_PEEK | MSG_DONTWAIT);
	if (r == 0)
		throw Error("peer process exited", false, true);
	/* A regular message (the peer finished first) stays queued for recv(). */
	if (r == ssize_t(sizeof t) && t == CtlType::Error)
		recv(CtlType::Error);
}

void Ctl::send_error(const std::string &what, bool unavailable) noexcept
{
	CtlMsg m;
	m.type = CtlType::Error;
	m.a = unavailable;
	m.set_data(what.data(), what.size());
	try {
		send(m);
	} catch (...) {
	}
}

/* ------------------------------------------------------------------ pattern */
static inline uint8_t pat(size_t j, size_t n, uint32_t salt)
{
	return uint8_t(j * 131u + (j >> 8) * 7u + n * 3u + salt * 29u + 1u);
}

void fill(char *p, size_t n, uint32_t salt)
{
	for (size_t j = 0; j < n; j++)
		p[j] = char(pat(j, n, salt));
}

void verify(const char *p, size_t n, uint32_t salt, const char *what)
{
	for (size_t j = 0; j < n; j++)
		if (uint8_t(p[j]) != pat(j, n, salt))
			throw Error(std::string("data verification failed: ") + what + ", size " +
				    std::to_string(n) + ", first bad byte at offset " +
				    std::to_string(j) + " (got " + std::to_string(uint8_t(p[j])) +
				    ", expected " + std::to_string(pat(j, n, salt)) + ")");
}

/* ------------------------------------------------------------------ buffers */
void Bufs::alloc(Fabric &f, size_t max_msg, uint32_t window, size_t max_rma)
{
	slot = std::max<size_t>(64, (max_msg + 63) / 64 * 64);
	gap = (f.prefix + 63) / 64 * 64;
	rx_slots = 2 * window;
	/* tx | rx slots | ctl tx (64) | ctl rx slots (64 each), each after a gap for the
	 * message prefix (none without FI_MSG_PREFIX) */
	msg = f.reg((slot + gap) * (1 + rx_slots) + (64 + gap) * (1 + ctl_slots), false);
	if (max_rma)
		rma = f.reg(max_rma, true);
}

/* ------------------------------------------------------------------ hand-shake */
RunResult client_run(Fabric &f, Bufs &b, Ctl &ctl, Test t, size_t size, uint64_t iters,
		     uint32_t window, bool verify)
{
	CtlMsg m;
	m.type = CtlType::Start;
	m.test = uint32_t(t);
	m.size = size;
	m.iters = iters;
	m.window = window;
	m.verify = verify;
	ctl.send(m);
	CtlMsg ready = ctl.recv(CtlType::Ready, &f);

	RunResult r;
	switch (t) {
	case Test::Latency:
		r = pingpong_client(f, b, size, iters, verify);
		break;
	case Test::Bandwidth:
	case Test::MsgRate:
		r = stream_client(f, b, size, iters, window, verify);
		break;
	case Test::RmaWrite:
	case Test::RmaRead:
		r = rma_client(f, b, t == Test::RmaWrite, size, iters, window, verify, ready.a,
			       ready.b);
		break;
	}
	CtlMsg done = ctl.recv(CtlType::Done, &f);
	if (done.len)
		r.note += (r.note.empty() ? "" : "; ") + done.data_str();
	return r;
}

void server_run(Fabric &f, Bufs &b, Ctl &ctl, const CtlMsg &m)
{
	const bool v = m.verify != 0;
	switch (Test(m.test)) {
	case Test::Latency:
		pingpong_server(f, b, ctl, m.size, m.iters, v);
		break;
	case Test::Bandwidth:
	case Test::MsgRate:
		stream_server(f, b, ctl, m.size, m.iters, uint32_t(m.window), v);
		break;
	case Test::RmaWrite:
	case Test::RmaRead:
		rma_server(f, b, ctl, Test(m.test) == Test::RmaWrite, m.size, v);
		break;
	default:
		throw Error("unknown test " + std::to_string(m.test));
	}
	CtlMsg done;
	done.type = CtlType::Done;
	ctl.send(done);
}

} // namespace bench
