/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Hang reports and statistics of an efa-fabric endpoint (fi_efa(7), STATISTICS AND
 * REPORTS; include/rdma/fi_ext_efa.h).
 *
 * A report lists every operation older than a given age (kind, size, peer, what it waits
 * for) and every peer with work in flight or queued (messages in flight, reorder state,
 * receiver-not-ready backoff, liveness), then the endpoint's counters. It is written on
 * demand (the signal FI_EFA_REPORT_SIGNAL, taken at the endpoint's next progress; or the
 * report call of FI_EFA_STATS_OPS), and at fi_close when operations are left
 * (FI_EFA_REPORT_AT_CLOSE), to FI_EFA_REPORT_PATH or the libfabric log; never stdout.
 * Nothing here runs on the data path.
 */
#include "rdm/ep.h"

#include "domain.h"
#include "log.h"
#include "params.h"

#include <rdma/fi_ext_efa.h>

#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace efa::rdm {

std::atomic<uint64_t> g_report_requests{0};

namespace {

void on_report_signal(int) { g_report_requests.fetch_add(1, std::memory_order_relaxed); }

int signal_number(const std::string &s)
{
	static const struct {
		const char *name;
		int num;
	} kNames[] = {{"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGURG", SIGURG},   {"SIGWINCH", SIGWINCH},
		      {"SIGPWR", SIGPWR},   {"SIGXCPU", SIGXCPU}, {"SIGPROF", SIGPROF}, {"SIGVTALRM", SIGVTALRM}};
	for (const auto &n : kNames)
		if (s == n.name || s == n.name + 3)
			return n.num;
	char *end = nullptr;
	const long v = strtol(s.c_str(), &end, 10);
	return end && !*end && v > 0 && v < NSIG ? int(v) : 0;
}

void appendf(std::string &out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string &out, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	out += buf;
}

const char *tx_kind(TxKind k)
{
	switch (k) {
	case TxKind::Msg: return "send";
	case TxKind::Tagged: return "tagged send";
	case TxKind::Write: return "write";
	case TxKind::Read: return "read";
	case TxKind::Atomic: return "atomic";
	}
	return "operation";
}

const char *proto_name(Proto p)
{
	switch (p) {
	case Proto::Eager: return "eager";
	case Proto::Medium: return "medium";
	case Proto::LongCts: return "long-CTS";
	case Proto::LongRead: return "long-read";
	case Proto::DeviceRma: return "device RDMA";
	case Proto::EmuWrite: return "emulated write";
	case Proto::EmuRead: return "emulated read";
	case Proto::EmuAtomic: return "emulated atomic";
	}
	return "?";
}

/* Microseconds until a peer's next retry after receiver-not-ready (0: now). */
uint64_t retry_in_us(const Peer &p, uint64_t now)
{
	return p.backoff_until > now ? (p.backoff_until - now) / 1000 : 0;
}

/* What a transmit operation waits for now (`now`: Ep::now_ns). */
std::string tx_state(const TxOp &op, uint64_t now)
{
	std::string s;
	const Peer *p = op.peer;
	if (p && p->dead)
		appendf(s, "its peer stopped answering (status %u); ", p->down);
	if (p && p->hs_sent && !p->hs_got)
		s += "handshake pending (no HANDSHAKE from the peer yet); ";
	if (p && !p->queued.empty())
		appendf(s, "%zu packets to the peer queued after receiver-not-ready, next retry in %lu us; ",
			p->queued.size(), (unsigned long)retry_in_us(*p, now));
	if (op.responder) {
		appendf(s, "answering a read: sent %lu of %lu bytes", (unsigned long)op.sent, (unsigned long)op.len);
		return s;
	}
	switch (op.proto) {
	case Proto::Eager:
	case Proto::Medium:
		if (op.need_receipt && !op.got_receipt && !op.inflight)
			s += "waiting for the peer's RECEIPT (delivery complete)";
		else
			appendf(s, "%u packets on the device, not acknowledged", op.inflight);
		break;
	case Proto::LongCts:
	case Proto::EmuWrite:
		if (op.sent < op.len && !op.window)
			appendf(s, "waiting for CTS (sent %lu of %lu bytes)", (unsigned long)op.sent, (unsigned long)op.len);
		else if (op.sent < op.len)
			appendf(s, "sending (%lu of %lu bytes, window %lu)", (unsigned long)op.sent, (unsigned long)op.len,
				(unsigned long)op.window);
		else if (op.need_receipt && !op.got_receipt)
			s += "waiting for the peer's RECEIPT";
		else
			appendf(s, "%u packets on the device, not acknowledged", op.inflight);
		break;
	case Proto::LongRead: s += "waiting for EOR (the receiver reads our buffer)"; break;
	case Proto::DeviceRma: appendf(s, "%u RDMA work requests on the device", op.inflight); break;
	case Proto::EmuRead:
		appendf(s, "waiting for the read response (%lu of %lu bytes)", (unsigned long)op.done, (unsigned long)op.len);
		break;
	case Proto::EmuAtomic: s += "waiting for the atomic response"; break;
	}
	return s;
}

const char *rx_kind(RxKind k)
{
	switch (k) {
	case RxKind::Eager: return "eager";
	case RxKind::Medium: return "medium";
	case RxKind::LongCts: return "long-CTS";
	case RxKind::LongRead: return "long-read";
	case RxKind::Shm: return "shm";
	}
	return "?";
}

double secs(uint64_t ns) { return double(ns) / 1e9; }

/* Copies as much of `s` as the caller's structure holds (`len` bytes): the size filled. */
template <typename S> ssize_t copy_out(void *out, const S &s, size_t len)
{
	const size_t n = std::min(len, sizeof s);
	std::memcpy(out, &s, n);
	return ssize_t(n);
}

} // namespace

namespace {

/* Endpoints that report at exit if still open (FI_EFA_REPORT_AT_CLOSE). */
std::mutex g_live_lock;
std::vector<Ep *> g_live;

void report_at_exit()
{
	std::lock_guard<std::mutex> g(g_live_lock);
	for (Ep *ep : g_live) {
		if (ep->hdr.gen != fork_generation())
			continue; /* a fork() child's copy of its parent's endpoint */
		/* Not when a thread of the application is inside it (exit from another). */
		std::unique_lock<DataLock> l(ep->lock, std::try_to_lock);
		if (l.owns_lock() && (ep->tx.busy() || ep->rx.pending()))
			ep->report(0, "exit with the endpoint open and operations in progress");
	}
	g_live.clear();
}

} // namespace

void report_watch(Ep *ep, bool on)
{
	if (!params().report_at_close)
		return;
	std::lock_guard<std::mutex> g(g_live_lock);
	if (on) {
		static const bool registered = atexit(report_at_exit) == 0;
		(void)registered;
		g_live.push_back(ep);
	} else {
		std::erase(g_live, ep);
	}
}

void install_report_signal()
{
	static std::once_flag once;
	std::call_once(once, [] {
		const std::string &v = params().report_signal;
		if (v.empty())
			return;
		const int sig = signal_number(v);
		if (!sig) {
			EFA_WARN(EpCtrl, "FI_EFA_REPORT_SIGNAL=%s is not a signal this provider takes (SIGUSR1, SIGUSR2, "
				 "SIGURG, SIGWINCH, SIGPWR, SIGXCPU, SIGPROF, SIGVTALRM or a number); no report on signal",
				 v.c_str());
			return;
		}
		struct sigaction sa {};
		sa.sa_handler = on_report_signal;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(sig, &sa, nullptr))
			EFA_WARN(EpCtrl, "FI_EFA_REPORT_SIGNAL: sigaction(%d): %s", sig, strerror(errno));
		else
			EFA_INFO(EpCtrl, "hang reports on signal %d (FI_EFA_REPORT_SIGNAL)", sig);
	});
}

std::string Ep::peer_name(const Peer &p) const
{
	std::string s = addr_to_string(p.raw);
	if (p.addr != FI_ADDR_NOTAVAIL)
		appendf(s, " (fi_addr %lu)", (unsigned long)p.addr);
	else
		s += " (not in the AV)";
	return s;
}

int Ep::report(uint64_t min_age_ns, const char *why)
{
	const uint64_t now = coarse_now_ns(), fine_now = now_ns();
	std::string out;
	appendf(out, "efa report (%s): pid %d, endpoint %s, %zu transmit operations, operations older than %.1f s:\n",
		why, int(getpid()), addr_to_string(self_addr()).c_str(), tx.in_use(), secs(min_age_ns));
	auto old = [&](uint64_t start) { return now >= start && now - start >= min_age_ns; };
	size_t listed = 0;
	tx.for_each_op([&](TxOp &op) {
		if (!old(op.start_ns))
			return;
		listed++;
		appendf(out, "  %s of %lu bytes to %s, %s", tx_kind(op.kind), (unsigned long)op.len,
			op.peer ? peer_name(*op.peer).c_str() : "?", proto_name(op.proto));
		if (op.kind == TxKind::Tagged)
			appendf(out, ", tag %#lx", (unsigned long)op.tag);
		appendf(out, ", message id %u, age %.1f s: %s\n", op.msg_id, secs(now - op.start_ns),
			tx_state(op, fine_now).c_str());
	});
	rx.for_each_recv([&](RxOp &r) {
		if (!old(r.start_ns) || r.released)
			return;
		listed++;
		appendf(out, "  receive posted, unmatched: %s%lu bytes", r.multi ? "multi-receive, " : "",
			(unsigned long)r.cap);
		if (r.tagged)
			appendf(out, ", tag %#lx ignore %#lx", (unsigned long)r.tag, (unsigned long)r.ignore);
		if (r.src == FI_ADDR_UNSPEC)
			out += ", from any peer";
		else
			appendf(out, ", from fi_addr %lu", (unsigned long)r.src);
		appendf(out, ", age %.1f s\n", secs(now - r.start_ns));
	});
	rx.for_each_msg([&](MsgRx &m) {
		if (!old(m.start_ns))
			return;
		listed++;
		if (m.peer)
			appendf(out, "  %s message of %lu bytes from %s", rx_kind(m.kind), (unsigned long)m.msg_len,
				peer_name(*m.peer).c_str());
		else if (m.src != FI_ADDR_NOTAVAIL)
			appendf(out, "  %s message of %lu bytes from fi_addr %lu through shm", rx_kind(m.kind),
				(unsigned long)m.msg_len, (unsigned long)m.src);
		else
			appendf(out, "  %s message of %lu bytes through shm from a sender not resolved to an fi_addr",
				rx_kind(m.kind), (unsigned long)m.msg_len);
		if (m.tagged)
			appendf(out, ", tag %#lx", (unsigned long)m.tag);
		appendf(out, ", age %.1f s: ", secs(now - m.start_ns));
		if (!m.bound)
			out += "unexpected, no posted receive matches it\n";
		else if (m.kind == RxKind::LongRead)
			appendf(out, "reading the sender's buffer (%lu of %lu bytes read)\n", (unsigned long)m.rd_done,
				(unsigned long)m.msg_len);
		else
			appendf(out, "receiving (%lu of %lu bytes%s)\n", (unsigned long)m.received, (unsigned long)m.msg_len,
				m.kind == RxKind::LongCts ? (m.owes_cts ? ", a CTS owed" : ", waiting for data under its CTS")
							  : "");
	});
	if (!listed)
		out += "  none\n";
	out += "peers with work in flight, queued, held or failed:\n";
	const std::unordered_map<const Peer *, size_t> ops_to = ops_per_peer();
	size_t npeers = 0;
	peers.for_each([&](const Peer &p) {
		const auto it = ops_to.find(&p);
		const size_t ops = it == ops_to.end() ? 0 : it->second;
		const size_t msgs = p.msgs.size();
		if (!ops && !msgs && p.queued.empty() && !p.rob.queued() && !p.dead && !p.probe_out)
			return;
		npeers++;
		appendf(out,
			"  %s: %zu operations to it, %zu messages from it in progress; reorder: next id %u, %zu packets held; "
			"%zu packets queued after receiver-not-ready, backoff %u us, next retry in %lu us; handshake %s/%s; ",
			peer_name(p).c_str(), ops, msgs, p.rob.expected(), p.rob.queued(), p.queued.size(), p.backoff_us,
			(unsigned long)retry_in_us(p, fine_now), p.hs_sent ? "sent" : "not sent",
			p.hs_got ? "received" : "not received");
		if (p.dead)
			appendf(out, "unresponsive (status %u)", p.down);
		else if (p.probe_out)
			appendf(out, "silent for %.1f s, probed", secs(fine_now - p.silent_since));
		else
			out += "answering";
		appendf(out, "; packets %lu out / %lu in, receiver-not-ready %lu, resent %lu\n", (unsigned long)p.tx_pkts,
			(unsigned long)p.rx_pkts, (unsigned long)p.rnr_received, (unsigned long)p.rnr_resent);
	});
	if (!npeers)
		out += "  none\n";
	out += "counters: packets out by type:";
	for (int t = 0; t < 256; t++)
		if (io.stats.tx_pkts[t])
			appendf(out, " %s %lu", v4::type_name(Type(t)), (unsigned long)io.stats.tx_pkts[t]);
	out += "; in:";
	for (int t = 0; t < 256; t++)
		if (io.stats.rx_pkts[t])
			appendf(out, " %s %lu", v4::type_name(Type(t)), (unsigned long)io.stats.rx_pkts[t]);
	appendf(out,
		"; receiver-not-ready %lu, resent %lu; sends inject %lu eager %lu medium %lu long-CTS %lu long-read "
		"%lu; dropped malformed %lu unknown %lu duplicate %lu\n",
		(unsigned long)io.stats.rnr_received, (unsigned long)io.stats.rnr_resent, (unsigned long)tx.counts.inject,
		(unsigned long)tx.counts.eager, (unsigned long)tx.counts.medium, (unsigned long)tx.counts.longcts,
		(unsigned long)tx.counts.longread, (unsigned long)drops.malformed, (unsigned long)drops.unknown,
		(unsigned long)drops.dup);
	reports++;

	const std::string &path = params().report_path;
	if (path.empty()) {
		size_t at = 0;
		while (at < out.size()) {
			const size_t nl = out.find('\n', at);
			EFA_WARN(EpCtrl, "%s", out.substr(at, nl - at).c_str());
			at = nl == std::string::npos ? out.size() : nl + 1;
		}
		return 0;
	}
	std::string file = path;
	if (const size_t p = file.find("%p"); p != std::string::npos)
		file.replace(p, 2, std::to_string(getpid()));
	FILE *f = fopen(file.c_str(), "a");
	if (!f) {
		EFA_WARN(EpCtrl, "FI_EFA_REPORT_PATH=%s: %s; the report goes nowhere", file.c_str(), strerror(errno));
		return -FI_EIO;
	}
	fputs(out.c_str(), f);
	fclose(f);
	return 0;
}

ssize_t Ep::query_stats(fi_efa_ep_stats *out, size_t len)
{
	fi_efa_ep_stats s{};
	std::memcpy(s.tx_pkts, io.stats.tx_pkts, sizeof s.tx_pkts);
	std::memcpy(s.tx_bytes, io.stats.tx_bytes, sizeof s.tx_bytes);
	std::memcpy(s.rx_pkts, io.stats.rx_pkts, sizeof s.rx_pkts);
	std::memcpy(s.rx_bytes, io.stats.rx_bytes, sizeof s.rx_bytes);
	s.rnr_received = io.stats.rnr_received;
	s.rnr_resent = io.stats.rnr_resent;
	s.rx_held = io.held_count();
	s.rx_copy_bytes = io.copy_bytes();
	s.send_inject = tx.counts.inject;
	s.send_eager = tx.counts.eager;
	s.send_medium = tx.counts.medium;
	s.send_longcts = tx.counts.longcts;
	s.send_longread = tx.counts.longread;
	if (shm) {
		s.shm_sends = shm->stats().sends;
		s.shm_recvs = shm->stats().recvs;
		s.pool_bytes += shm->pool_bytes();
	}
	if (dom->mr_cache) {
		const MrCacheStats c = dom->mr_cache->stats();
		s.mr_cache_hits = c.hits;
		s.mr_cache_misses = c.misses;
	}
	s.drop_malformed = drops.malformed;
	s.drop_unknown = drops.unknown;
	s.drop_dup = drops.dup;
	s.drop_far = drops.far;
	s.drop_foreign = drops.foreign;
	peers.for_each([&](const Peer &) { s.peers++; });
	s.tx_ops = tx.in_use();
	rx.for_each_recv([&](RxOp &r) { s.rx_ops += !r.released; });
	rx.for_each_msg([&](MsgRx &) { s.rx_msgs++; });
	s.reports = reports;
	s.pool_bytes += tx.pool_bytes() + rx.pool_bytes();
	return copy_out(out, s, len);
}

ssize_t Ep::query_peer(fi_addr_t addr, fi_efa_peer_stats *out, size_t len)
{
	const Peer *found = peers.find(addr);
	if (!found)
		return -FI_ENOENT;
	const Peer &p = *found;
	fi_efa_peer_stats s{};
	s.tx_pkts = p.tx_pkts;
	s.tx_bytes = p.tx_bytes;
	s.rx_pkts = p.rx_pkts;
	s.rx_bytes = p.rx_bytes;
	s.rnr_received = p.rnr_received;
	s.rnr_resent = p.rnr_resent;
	tx.for_each_op([&](TxOp &op) { s.tx_ops += op.peer == &p; });
	s.rx_msgs = p.msgs.size();
	s.reorder_expected = p.rob.expected();
	s.reorder_held = uint32_t(p.rob.queued());
	s.backoff_us = p.backoff_us;
	s.queued = uint32_t(p.queued.size());
	s.flags = (p.hs_sent ? FI_EFA_PEER_HANDSHAKE_SENT : 0) | (p.hs_got ? FI_EFA_PEER_HANDSHAKE_RECEIVED : 0) |
		  (p.dead ? FI_EFA_PEER_UNRESPONSIVE : 0) | (p.probe_out ? FI_EFA_PEER_PROBING : 0);
	return copy_out(out, s, len);
}

std::unordered_map<const Peer *, size_t> Ep::ops_per_peer()
{
	std::unordered_map<const Peer *, size_t> n;
	tx.for_each_op([&](TxOp &op) { n[op.peer]++; });
	return n;
}

} // namespace efa::rdm
