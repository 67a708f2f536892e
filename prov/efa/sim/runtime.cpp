/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The device engine: one Runtime per software device per process.
 *
 * Who moves packets (README.md, "Engine"):
 *  - An application thread that polls a CQ drains the sockets of that CQ's QPs itself
 *    and runs due timers, so a polling application pays no thread wake-up per packet.
 *  - The engine thread sleeps in epoll on every QP socket (EPOLLONESHOT) and on the
 *    device's timer deadline. When a socket becomes readable and the QP's CQs were
 *    polled within EFASIM_POLL_GRACE_US, it leaves the socket to the poller and only
 *    rechecks after the grace period; otherwise it drains the socket itself. This is
 *    how target-side RDMA, acknowledgements and retransmissions progress while the
 *    application does not call into the device at all. When idle it blocks: no spinning.
 */
#include "sim.h"

#include <arpa/inet.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace efasim {

namespace {

std::mutex g_rt_lock;
Runtime *g_rt[16];
thread_local bool t_in_engine;

constexpr unsigned kRxBatch = 32;

/* A receive slot holds one datagram, or with UDP_GRO one coalesced buffer (at most one
 * IPv4 datagram's payload). */
size_t rx_slot_size()
{
	const Config &c = config();
	const size_t one = (sizeof(WireHdr) + 64 + std::max(c.segment, c.mtu) + 63) & ~size_t(63);
	return c.gso ? std::max<size_t>(one, 65536) : one;
}

constexpr size_t kRxCtl = CMSG_SPACE(sizeof(int));
/* Datagrams one coalesced buffer may hold: UDP_MAX_SEGMENTS of current kernels. */
constexpr unsigned kRxMaxSegs = 128;

void dump_stats(const Runtime *rt)
{
	const efasim_stats &s = rt->stats;
	fprintf(stderr,
		"efasim[%d]: efasim%d stats: tx %lu pkts %lu B, rx %lu pkts %lu B, retransmits %lu, "
		"acks %lu, rnr naks sent/recv %lu/%lu, rnr retries %lu, qkey drops %lu, dups %lu, "
		"out-of-order %lu, malformed %lu, remote errors %lu, rdma read/write %lu/%lu B, "
		"unsolicited %lu, hinted wrs %lu, faults drop/dup/delay %lu/%lu/%lu, peer timeouts %lu, "
		"cq overruns %lu, engine wakeups %lu, poll drains %lu, ud sent/received/no-recv/dropped "
		"%lu/%lu/%lu/%lu, batched sends %lu, coalesced receives %lu\n",
		int(getpid()), rt->index, s.tx_packets, s.tx_bytes, s.rx_packets, s.rx_bytes,
		s.retransmits, s.acks_sent, s.rnr_naks_sent, s.rnr_naks_received, s.rnr_retries,
		s.qkey_drops, s.duplicates, s.out_of_order, s.malformed, s.remote_errors,
		s.rdma_read_bytes, s.rdma_write_bytes, s.unsolicited_recvs, s.hinted_wrs,
		s.fault_dropped, s.fault_duplicated, s.fault_delayed, s.peer_timeouts, s.cq_overruns,
		s.engine_wakeups, s.poll_drains, s.ud_sent, s.ud_received, s.ud_no_recv, s.ud_dropped,
		s.tx_batches, s.rx_coalesced);
}

/* Set by an atexit handler registered when the first device opens (so it runs before
 * the destructors of libraries loaded earlier, libfabric's among them). */
std::atomic<bool> g_exiting{false};

/* At exit: whether `m` is, or within 200 ms becomes, free (the engine holds it only
 * briefly; a thread interrupted by a signal while holding it never lets go). */
bool lock_comes_free(std::mutex &m)
{
	for (int i = 0; i < 200; i++) {
		if (m.try_lock()) {
			m.unlock();
			return true;
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	return false;
}

bool faults_enabled()
{
	const Config &c = config();
	return c.loss > 0 || c.dup > 0 || c.reorder > 0 || c.delay_us > 0;
}

/*
 * fork(): the child shares the parent's sockets and epoll set but has no engine thread.
 * It must not use the parent's device objects; if it opens a device, it gets a new
 * Runtime of its own.
 */
void atfork_prepare() { g_rt_lock.lock(); }
void atfork_parent() { g_rt_lock.unlock(); }
void atfork_child()
{
	for (Runtime *&rt : g_rt)
		rt = nullptr;
	g_rt_lock.unlock();
}

} // namespace

Runtime *Runtime::acquire(int index)
{
	static std::once_flag once;
	std::call_once(once, [] {
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
		atexit([] { g_exiting.store(true); });
	});
	std::lock_guard<std::mutex> g(g_rt_lock);
	if (Runtime *rt = g_rt[index]) {
		rt->refs++;
		return rt;
	}
	const Config &c = config();
	auto *rt = new Runtime();
	rt->index = index;
	rt->addr = c.addrs[std::min<size_t>(size_t(index), c.addrs.size() - 1)];
	rt->port_base = uint16_t(c.port_base + index * c.port_stride);
	rt->gid = make_gid(rt->addr, rt->port_base, uint8_t(index));
	rt->refs = 1;
	rt->pid = uint32_t(getpid());
	rt->next_ahn = 1;
	rt->next_deadline = UINT64_MAX;
	rt->timer_hint = UINT64_MAX;
	rt->engine_wake_at = UINT64_MAX;
	rt->rng = c.seed * 0x9e3779b97f4a7c15ull + uint64_t(index) + 1;
	rt->init_staging();
	rt->epfd = epoll_create1(EPOLL_CLOEXEC);
	rt->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (rt->epfd < 0 || rt->evfd < 0) {
		int err = errno;
		if (rt->epfd >= 0)
			close(rt->epfd);
		if (rt->evfd >= 0)
			close(rt->evfd);
		delete rt;
		errno = err;
		return nullptr;
	}
	epoll_event ev{};
	ev.events = EPOLLIN;
	ev.data.u64 = 0;
	epoll_ctl(rt->epfd, EPOLL_CTL_ADD, rt->evfd, &ev);
	rt->engine = std::thread([rt] { rt->engine_main(); });
	g_rt[index] = rt;
	SIM_INFO("efasim%d: device up on %s port base %u, profile %s", index, inet_ntoa(rt->addr),
		 rt->port_base, c.profile->name);
	return rt;
}

void Runtime::release(Runtime *rt)
{
	{
		std::lock_guard<std::mutex> g(g_rt_lock);
		if (--rt->refs > 0)
			return;
		g_rt[rt->index] = nullptr;
	}
	rt->stop = true;
	rt->kick();
	if (g_exiting.load() && !lock_comes_free(rt->lock)) {
		/* exit() from a signal handler that interrupted a thread inside the device
		 * (libraries such as libinfinipath install such handlers): that thread holds
		 * the lock the engine needs to stop, and never releases it. Joining would hang
		 * the exit; the process is ending, so the engine and the memory stay. */
		rt->engine.detach();
		return;
	}
	rt->engine.join();
	if (config().stats_dump)
		dump_stats(rt);
	close(rt->epfd);
	close(rt->evfd);
	delete rt;
}

void Runtime::kick()
{
	uint64_t one = 1;
	ssize_t r = write(evfd, &one, sizeof one);
	(void)r;
}

double Runtime::rand01()
{
	/* xorshift64*: reproducible from EFASIM_SEED */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return double((rng * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0);
}

void Runtime::register_qp_fd(Qp *qp)
{
	epoll_event ev{};
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.u64 = qp->qpn;
	epoll_ctl(epfd, EPOLL_CTL_ADD, qp->fd, &ev);
}

void Runtime::unregister_qp_fd(Qp *qp) { epoll_ctl(epfd, EPOLL_CTL_DEL, qp->fd, nullptr); }

namespace {

void rearm(Runtime *rt, Qp *qp)
{
	epoll_event ev{};
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.u64 = qp->qpn;
	epoll_ctl(rt->epfd, EPOLL_CTL_MOD, qp->fd, &ev);
}

/* While anybody polls, the engine looks again at least this often (engine_main). */
uint64_t poller_recheck_max_ns() { return std::max<uint64_t>(uint64_t(config().poll_grace_us) * 1000, 4000000); }

bool polled_recently(const Qp *qp, uint64_t now)
{
	const uint64_t grace = uint64_t(config().poll_grace_us) * 1000;
	auto recent = [&](const Cq *cq) {
		uint64_t t = cq->last_poll_ns.load(std::memory_order_relaxed);
		return t && now - t < grace;
	};
	return recent(qp->scq) || recent(qp->rcq);
}

} // namespace

void Runtime::engine_main()
{
	t_in_engine = true;
	prctl(PR_SET_TIMERSLACK, 1000UL);
	prctl(PR_SET_NAME, "efasim-engine");
	epoll_event evs[64];
	std::vector<uint32_t> ready;
	const uint64_t grace = uint64_t(config().poll_grace_us) * 1000;
	/*
	 * While an application keeps polling, the engine only checks now and then whether it
	 * stopped; the interval doubles from the grace period up to 4 ms, so a polling
	 * application costs the engine about 250 wake-ups a second, not one per packet. The
	 * price: when an application stops polling, the engine takes over within 4 ms.
	 */
	const uint64_t recheck_max = poller_recheck_max_ns();
	uint64_t recheck = grace;

	while (!stop.load(std::memory_order_acquire)) {
		uint64_t now = now_ns();
		const uint64_t lp = last_poll_any.load(std::memory_order_relaxed);
		const bool pollers = lp && now - lp < grace;
		uint64_t wake;
		if (pollers) {
			/* Pollers drain their CQs' sockets and run the timers; just look again later. */
			wake = now + recheck;
			recheck = std::min(recheck * 2, recheck_max);
		} else {
			recheck = grace;
			wake = engine_has_deferred.load(std::memory_order_relaxed) ? now
										   : timer_hint.load(std::memory_order_acquire);
		}
		/* Sequentially consistent with arm_timer(), which stores timer_hint and then
		 * loads engine_wake_at: either it sees this wake-up and kicks, or this load
		 * sees its deadline. */
		engine_wake_at.store(wake);
		if (!pollers && timer_hint.load() < wake)
			wake = timer_hint.load();

		int n;
		if (wake == UINT64_MAX) {
			n = epoll_wait(epfd, evs, 64, -1);
		} else {
			uint64_t d = wake > now ? wake - now : 0;
			timespec ts{time_t(d / 1000000000ull), long(d % 1000000000ull)};
			n = epoll_pwait2(epfd, evs, 64, &ts, nullptr);
			if (n < 0 && errno == ENOSYS)
				n = epoll_wait(epfd, evs, 64, int((d + 999999) / 1000000));
		}
		engine_wake_at.store(0, std::memory_order_relaxed);
		if (n < 0 && errno != EINTR)
			continue;

		ready.clear();
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u64 == 0) {
				uint64_t v;
				while (read(evfd, &v, sizeof v) > 0) {
				}
			} else {
				ready.push_back(uint32_t(evs[i].data.u64));
			}
		}

		std::lock_guard<std::mutex> g(lock);
		stats.engine_wakeups++;
		now = now_ns();
		for (uint32_t qpn : ready) {
			auto it = qps.find(qpn);
			if (it == qps.end())
				continue;
			Qp *qp = it->second;
			if (polled_recently(qp, now)) {
				qp->deferred = true;
				engine_has_deferred = true;
				continue;
			}
			drain(qp);
			rearm(this, qp);
		}
		if (engine_has_deferred.load(std::memory_order_relaxed)) {
			bool still = false;
			for (auto &[qpn, qp] : qps) {
				if (!qp->deferred)
					continue;
				if (polled_recently(qp, now)) {
					still = true;
					continue;
				}
				qp->deferred = false;
				drain(qp);
				rearm(this, qp);
			}
			engine_has_deferred = still;
		}
		now = now_ns(); /* the drains above took time; timers compare against their stamps */
		const uint64_t lp2 = last_poll_any.load(std::memory_order_relaxed);
		if (now >= next_deadline && !(lp2 && now - lp2 < grace))
			run_timers(now);
	}
}

/* The device's own staging memory, as a NIC has its own: built when the device opens,
 * never grown, and not written (make_unique_for_overwrite) so that an idle device holds
 * no resident memory for it. recvmmsg changes only each header's name and control
 * lengths (drain resets them). */
void Runtime::init_staging()
{
	const size_t slot = rx_slot_size();
	rx_mem = std::make_unique_for_overwrite<uint8_t[]>(slot * kRxBatch);
	rx_iov.resize(kRxBatch);
	rx_from.resize(kRxBatch);
	rx_msgs.resize(kRxBatch);
	rx_ctl.resize(kRxCtl * kRxBatch);
	for (unsigned i = 0; i < kRxBatch; i++) {
		rx_iov[i] = {rx_mem.get() + i * slot, slot};
		rx_msgs[i].msg_hdr = msghdr{};
		rx_msgs[i].msg_hdr.msg_name = &rx_from[i];
		rx_msgs[i].msg_hdr.msg_namelen = sizeof rx_from[i];
		rx_msgs[i].msg_hdr.msg_iov = &rx_iov[i];
		rx_msgs[i].msg_hdr.msg_iovlen = 1;
		rx_msgs[i].msg_hdr.msg_control = rx_ctl.data() + i * kRxCtl;
		rx_msgs[i].msg_hdr.msg_controllen = kRxCtl;
	}
	rx_scratch = std::make_unique_for_overwrite<uint8_t[]>(slot);
	rx_dgrams.resize(kRxBatch * kRxMaxSegs);
	rx_order.resize(rx_dgrams.size());
	/* What a batch copies is part of its bytes (batch_takes bounds them). */
	txb.arena.reset(new uint8_t[kGsoMaxBytes]);
	/* A kernel without UDP segmentation offload (before 4.18) would ignore the control
	 * message and send a batch as one datagram: ask it first. */
	gso_ok = false;
	if (config().gso) {
		const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		int seg = 0;
		socklen_t len = sizeof seg;
		gso_ok = fd >= 0 && getsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, &len) == 0;
		if (fd >= 0)
			close(fd);
		if (!gso_ok)
			SIM_INFO("the kernel has no UDP segmentation offload: every datagram is sent by itself");
	}
}

void Runtime::drain(Qp *qp)
{
	const Config &c = config();
	if (!t_in_engine)
		stats.poll_drains++;

	mmsghdr *msgs = rx_msgs.data();
	const iovec *iov = rx_iov.data();
	const sockaddr_in *from = rx_from.data();
	RxDgram *dg = rx_dgrams.data();
	uint16_t *order = rx_order.data();
	const size_t room = rx_dgrams.size();

	for (int round = 0; round < 8; round++) {
		int n = recvmmsg(qp->fd, msgs, kRxBatch, MSG_DONTWAIT, nullptr);
		if (n <= 0)
			break;
		unsigned nd = 0;
		const unsigned paths = c.paths;
		for (int i = 0; i < n; i++) {
			msghdr &mh = msgs[i].msg_hdr;
			uint32_t seg = 0;
			for (cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
				if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
					int v = 0;
					std::memcpy(&v, CMSG_DATA(cm), sizeof v);
					seg = v > 0 ? uint32_t(v) : 0;
				}
			mh.msg_namelen = sizeof rx_from[i];
			mh.msg_controllen = kRxCtl;
			const uint32_t total = msgs[i].msg_len;
			if (!seg || seg >= total)
				seg = total;
			else
				stats.rx_coalesced += (total + seg - 1) / seg;
			uint32_t off = 0;
			do {
				if (nd == room) {
					/* More segments than any kernel coalesces (UDP_GRO_CNT_MAX). */
					stats.malformed++;
					break;
				}
				const uint32_t len = std::min(seg, total - off);
				const uint8_t *at = static_cast<uint8_t *>(iov[i].iov_base) + off;
				dg[nd++] = {off, len, uint8_t(i),
					    uint8_t(len >= sizeof(WireHdr) ? at[offsetof(WireHdr, path)] % paths : 0)};
				off += len;
			} while (off < total);
		}
		/*
		 * The paths of a multipath network are separate queues: handle the batch path by
		 * path, starting from a rotating path, so packets that were sent in one order over
		 * several paths are seen in another, as on a real fabric.
		 */
		unsigned k = 0;
		const unsigned start = rx_slot++ % paths;
		for (unsigned r = 0; r < paths; r++) {
			const unsigned want = (start + r) % paths;
			for (unsigned d = 0; d < nd; d++)
				if (dg[d].path == want)
					order[k++] = uint16_t(d);
		}
		for (unsigned j = 0; j < k; j++) {
			const RxDgram &d = dg[order[j]];
			if (qp->destroying)
				return;
			const uint8_t *at = static_cast<uint8_t *>(iov[d.slot].iov_base) + d.off;
			if (reinterpret_cast<uintptr_t>(at) % alignof(WireHdr)) {
				/* Cut out of a coalesced buffer at an offset the header cannot be read
				 * at in place (datagrams whose size is not a multiple of 8). */
				std::memcpy(rx_scratch.get(), at, d.len);
				at = rx_scratch.get();
			}
			process_datagram(qp, at, d.len, from[d.slot]);
		}
		if (n < int(kRxBatch))
			break;
	}
}

void Runtime::progress_cq(Cq *cq)
{
	std::lock_guard<std::mutex> g(lock);
	while (!cq->overflow.empty()) {
		uint32_t h = cq->head.load(std::memory_order_relaxed);
		if (h - cq->tail.load(std::memory_order_acquire) > cq->mask)
			break;
		cq->ring[h & cq->mask] = cq->overflow.front();
		cq->overflow.pop_front();
		cq->head.store(h + 1, std::memory_order_release);
	}
	for (Qp *qp : cq->qps)
		if (!qp->destroying)
			drain(qp);
	uint64_t now = now_ns();
	if (now >= next_deadline)
		run_timers(now);
}

void Runtime::arm_timer(Peer *p, uint64_t when)
{
	if (!p->active) {
		p->active = true;
		p->deadline = when;
		active.push_back(p);
	} else if (when < p->deadline) {
		p->deadline = when;
	}
	if (when < next_deadline) {
		next_deadline = when;
		timer_hint.store(when);
		if (!t_in_engine) {
			/*
			 * Polling threads run due timers, but only while they poll: a thread that
			 * sets a timer (an acknowledgement of what it just received, the
			 * retransmission of what it just posted) may stop polling at once, to
			 * compute or to sleep in read() or on a completion channel. The engine
			 * takes over then, as long as it wakes up: while anybody polls it looks
			 * again within poller_recheck_max_ns(), but an engine that went to sleep
			 * before this thread began polling planned no wake-up at all. Kick it
			 * unless it is already due before the deadline, or before the poll
			 * recheck; a polling application still costs no wake-up per timer.
			 */
			const uint64_t now = now_ns();
			const uint64_t lp = last_poll_any.load(std::memory_order_relaxed);
			const bool pollers = lp && now - lp < uint64_t(config().poll_grace_us) * 1000;
			const uint64_t ew = engine_wake_at.load();
			if (when < ew && (!pollers || ew > now + poller_recheck_max_ns()))
				kick();
		}
	}
}

void Runtime::run_timers(uint64_t now)
{
	uint64_t next = UINT64_MAX;
	/* peer_timer() may append to `active` (arm_timer) or fail ops: iterate by index. */
	for (size_t i = 0; i < active.size();) {
		Peer *p = active[i];
		if (p->deadline <= now)
			peer_timer(p, now);
		if (p->deadline == UINT64_MAX) {
			p->active = false;
			active[i] = active.back();
			active.pop_back();
			continue;
		}
		next = std::min(next, p->deadline);
		i++;
	}
	if (!held.empty()) {
		flush_held(now, false);
		for (const Held &h : held)
			next = std::min(next, h.due_ns);
	}
	next_deadline = next;
	timer_hint.store(next, std::memory_order_release);
}

namespace {

/* One datagram, the pieces of iov[first, last) of a batch, by itself. */
void send_one(int fd, const sockaddr_in &to, const iovec *iov, size_t n)
{
	msghdr m{};
	m.msg_name = const_cast<sockaddr_in *>(&to);
	m.msg_namelen = sizeof to;
	m.msg_iov = const_cast<iovec *>(iov);
	m.msg_iovlen = n;
	/* A full socket buffer or an ICMP error is loss: retransmission recovers it. */
	ssize_t r = sendmsg(fd, &m, MSG_DONTWAIT);
	(void)r;
}

} // namespace

/*
 * Whether datagram `bytes` long may join the batch for p: the kernel cuts a
 * segmentation-offload buffer into equal segments, the last one possibly shorter.
 */
static bool batch_takes(const Runtime::TxBatch &b, const Peer *p, size_t bytes, int iovcnt)
{
	return b.peer == p && !b.closed && bytes <= b.seg && b.count < Runtime::kGsoMaxSegs &&
	       b.bytes + bytes <= Runtime::kGsoMaxBytes && b.niov + unsigned(iovcnt) <= std::size(b.iov);
}

void Runtime::xmit(Qp *qp, const sockaddr_in &to, const iovec *iov, int iovcnt, Peer *p)
{
	size_t bytes = 0;
	for (int i = 0; i < iovcnt; i++)
		bytes += iov[i].iov_len;
	stats.tx_packets++;
	stats.tx_bytes += bytes;

	TxBatch &b = txb;
	bool batch = p && b.depth && !p->no_gso && gso_ok && !faults_enabled() && bytes <= kGsoMaxBytes;
	if (batch && b.peer && !batch_takes(b, p, bytes, iovcnt)) {
		flush_tx();
		batch = !p->no_gso; /* that flush may have found the offload refused */
	}
	if (!batch && p && b.peer == p)
		flush_tx(); /* what waits for p leaves first: no datagram overtakes */
	if (batch) {
		if (!b.peer) {
			b.peer = p;
			b.seg = uint32_t(bytes);
		}
		b.first[b.count++] = uint16_t(b.niov);
		b.bytes += bytes;
		b.closed = bytes < b.seg;
		for (int i = 0; i < iovcnt; i++) {
			iovec piece = iov[i];
#if defined(__SANITIZE_THREAD__)
			const bool copy = true; /* DMA reads out of ThreadSanitizer's sight (sim.h, dma_copy) */
#else
			/* Headers live on the caller's stack; payloads stay where they are until
			 * flush_tx, within this hold of the lock (registered memory of an
			 * outstanding work request, or of a key checked just now). */
			const bool copy = piece.iov_len < kTxSmall;
#endif
			if (copy && piece.iov_len) {
				uint8_t *at = b.arena.get() + b.arena_used;
				dma_copy(at, piece.iov_base, piece.iov_len);
				b.arena_used += piece.iov_len;
				piece.iov_base = at;
			}
			b.iov[b.niov++] = piece;
		}
		return;
	}

#if defined(__SANITIZE_THREAD__)
	/* DMA reads (sim.h, dma_copy): staged by the device, out of ThreadSanitizer's sight,
	 * before sendmsg (which it instruments) reads them. */
	thread_local std::vector<uint8_t> staged;
	staged.resize(bytes);
	for (size_t i = 0, off = 0; i < size_t(iovcnt); off += iov[i].iov_len, i++)
		dma_copy(staged.data() + off, iov[i].iov_base, iov[i].iov_len);
	const iovec one{staged.data(), bytes};
	iov = &one;
	iovcnt = 1;
#endif
	if (!faults_enabled()) {
		send_one(qp->fd, to, iov, size_t(iovcnt));
		return;
	}

	const Config &c = config();
	const uint64_t now = now_ns();
	if (c.loss > 0 && rand01() < c.loss) {
		stats.fault_dropped++;
		flush_held(now, false);
		return;
	}
	int copies = (c.dup > 0 && rand01() < c.dup) ? 2 : 1;
	if (copies == 2)
		stats.fault_duplicated++;
	for (int k = 0; k < copies; k++) {
		Held h;
		h.fd = qp->fd;
		h.to = to;
		h.due_ns = now + uint64_t(c.delay_us) * 1000;
		h.after = c.reorder ? uint32_t(rand01() * double(c.reorder + 1)) : 0;
		h.bytes.reserve(bytes);
		for (int i = 0; i < iovcnt; i++) {
			const auto *b = static_cast<const uint8_t *>(iov[i].iov_base);
			h.bytes.insert(h.bytes.end(), b, b + iov[i].iov_len);
		}
		if (h.after || c.delay_us)
			stats.fault_delayed++;
		/* A packet held for reordering is also released by time, at the latest 1 ms on. */
		if (h.after && !c.delay_us)
			h.due_ns = now + 1000000;
		/* Each transmission ages the packets held for reordering by one. */
		for (Held &o : held)
			if (o.after)
				o.after--;
		held.push_back(std::move(h));
	}
	flush_held(now, false);
	if (!held.empty()) {
		uint64_t due = UINT64_MAX;
		for (const Held &o : held)
			due = std::min(due, o.due_ns);
		if (due < next_deadline) {
			next_deadline = due;
			timer_hint.store(due, std::memory_order_release);
			if (!t_in_engine && due < engine_wake_at.load(std::memory_order_acquire))
				kick();
		}
	}
}

void Runtime::flush_tx()
{
	TxBatch &b = txb;
	if (!b.peer)
		return;
	Peer *p = b.peer;
	const int fd = p->qp->fd;
	b.first[b.count] = uint16_t(b.niov);
	bool sent = false;
	if (b.count > 1) {
		msghdr m{};
		m.msg_name = &p->sa;
		m.msg_namelen = sizeof p->sa;
		m.msg_iov = b.iov;
		m.msg_iovlen = b.niov;
		alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(uint16_t))] = {};
		m.msg_control = ctl;
		m.msg_controllen = sizeof ctl;
		cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_UDP;
		cm->cmsg_type = UDP_SEGMENT;
		cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		const uint16_t seg = uint16_t(b.seg);
		std::memcpy(CMSG_DATA(cm), &seg, sizeof seg);
		const ssize_t r = sendmsg(fd, &m, MSG_DONTWAIT);
		const int err = r < 0 ? errno : 0;
		if (err == EINVAL || err == EIO || err == EMSGSIZE || err == ENOPROTOOPT || err == EOPNOTSUPP) {
			/* No offload toward this peer (EMSGSIZE: a path MTU below the segment
			 * size, as the namespace test's veth gives; EINVAL, EIO: other limits of
			 * the offload): datagram by datagram, now and from now on. */
			SIM_INFO("QP %u -> %u: the kernel refused UDP segmentation offload (%s); sending "
				 "datagram by datagram to this peer",
				 p->qp->qpn, p->qpn, strerror(err));
			p->no_gso = true;
		} else {
			/* Sent, or lost as a whole (a full buffer, an unreachable network), as a
			 * single datagram would be: retransmission recovers it. */
			if (!err)
				stats.tx_batches++;
			sent = true;
		}
	}
	if (!sent)
		for (unsigned i = 0; i < b.count; i++)
			send_one(fd, p->sa, &b.iov[b.first[i]], size_t(b.first[i + 1] - b.first[i]));
	b.peer = nullptr;
	b.count = 0;
	b.bytes = 0;
	b.niov = 0;
	b.closed = false;
	b.arena_used = 0;
}

void Runtime::flush_held(uint64_t now, bool force)
{
	for (auto it = held.begin(); it != held.end();) {
		bool due = force || (it->after == 0 && (config().delay_us == 0 || it->due_ns <= now)) ||
			   it->due_ns <= now;
		if (!due) {
			++it;
			continue;
		}
		ssize_t r = sendto(it->fd, it->bytes.data(), it->bytes.size(), MSG_DONTWAIT,
				   reinterpret_cast<const sockaddr *>(&it->to), sizeof it->to);
		(void)r;
		it = held.erase(it);
	}
}

} // namespace efasim
