/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * SRD semantics over UDP: the reliable, unordered channel between two QPs, and what the
 * device does with each packet that arrives (README.md, "Reliability" and "Packets").
 *
 * Sender: each Peer holds a channel with an epoch, sequence numbers and an in-flight ring
 * bounded by EFASIM_WINDOW packets and EFASIM_WINDOW_BYTES. Unacknowledged packets are
 * retransmitted with exponential backoff; a peer that acknowledges nothing for
 * EFASIM_TIMEOUT_MS fails everything in flight with UNRESP (it answered before) or
 * UNREACH (it never did). Packets are rebuilt from the work request on retransmission,
 * so nothing is copied on the send path.
 *
 * Receiver: a window of kRxWindow sequence numbers above rx_base filters duplicates;
 * delivery is immediate, in whatever order packets arrive. Acknowledgements are
 * cumulative + 128-bit selective, piggybacked on any packet to the peer, or sent alone
 * after EFASIM_ACK_DELAY_US or every EFASIM_ACK_EVERY packets. A packet that cannot be
 * delivered gets a NAK: RNR leaves no trace and is redelivered on retry; errors are
 * remembered so a retransmission gets the same answer.
 *
 * All functions here run with Runtime::lock held.
 */
#include "sim.h"

#include <sys/random.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace efasim {

namespace {

std::atomic<uint32_t> g_epoch;

/* Epochs grow across process incarnations (wall-clock milliseconds), so a receiver can
 * tell a restarted sender from a stale packet of an older channel. */
uint32_t new_epoch()
{
	timeval tv;
	gettimeofday(&tv, nullptr);
	uint32_t e = uint32_t(uint64_t(tv.tv_sec) * 1000 + uint64_t(tv.tv_usec) / 1000);
	uint32_t prev = g_epoch.load();
	for (;;) {
		uint32_t next = seq_lt(prev, e) ? e : prev + 1;
		if (g_epoch.compare_exchange_weak(prev, next))
			return next;
	}
}

/* The peer's in-flight ring: indexed by seq & (size - 1); it grows by doubling up to
 * the window (kRingMin slots first) and is freed while nothing is in flight or queued,
 * so that an idle peer holds none (memory per idle peer, fi_efa(7)). */
constexpr uint32_t kRingMin = 16;

uint32_t ring_mask(const Peer *p) { return uint32_t(p->ring.size()) - 1; }

/* Room for one more sequence number in flight (next_seq - una < window). */
void ring_reserve(Peer *p)
{
	const uint32_t used = p->next_seq - p->una;
	if (used < p->ring.size())
		return;
	const uint32_t old_mask = ring_mask(p);
	std::vector<Inflight> bigger(p->ring.empty() ? kRingMin : p->ring.size() * 2);
	const uint32_t mask = uint32_t(bigger.size()) - 1;
	for (uint32_t s = p->una; s != p->next_seq; s++)
		bigger[s & mask] = p->ring[s & old_mask];
	p->ring.swap(bigger);
}

/* An idle channel gives its ring back. */
void ring_release_if_idle(Peer *p)
{
	if (p->una == p->next_seq && !p->txq_head && !p->ring.empty())
		std::vector<Inflight>().swap(p->ring);
}

void header(Runtime *rt, Peer *p, WireHdr &h, uint8_t type, uint32_t body_len)
{
	std::memset(&h, 0, sizeof h);
	h.magic = kWireMagic;
	h.version = kWireVersion;
	h.type = type;
	h.src_qpn = uint16_t(p->qp->qpn);
	h.dst_qpn = uint16_t(p->qpn);
	std::memcpy(h.src_gid, rt->gid.raw, 16);
	h.epoch = p->epoch;
	h.snd_una = p->una;
	h.body_len = body_len;
	/* Piggyback the receive state of the reverse channel. */
	if (p->rx_valid) {
		h.flags |= PF_ACK;
		h.ack_epoch = p->rx_epoch;
		h.ack_cum = p->rx_base;
		/* Selective bit i is receive bit i + 1 (bit 0, rx_base itself, is never set). */
		static_assert(kSackBits % 64 == 0 && kSackBits < kRxWindow);
		for (unsigned w = 0; w < kSackBits / 64; w++)
			h.ack_sack[w] = p->rx_bits ? p->rx_bits[w] >> 1 | p->rx_bits[w + 1] << 63 : 0;
		p->ack_pending = 0;
		p->ack_due_ns = 0;
	}
}

bool mr_range_ok(const Mr *mr, uint64_t addr, uint64_t len)
{
	if (addr < mr->iova)
		return false;
	uint64_t off = addr - mr->iova;
	return off <= mr->mr.length && len <= mr->mr.length - off;
}

/* Host address of [addr, addr+len) in the MR registered as `key`, or null. */
uint8_t *remote_target(Runtime *rt, Qp *qp, uint32_t key, uint64_t addr, uint64_t len, int access)
{
	Mr *mr = rt->mr_lookup(key);
	if (!mr || mr->pd != qp->pd || !(mr->access & access) || !mr_range_ok(mr, addr, len))
		return nullptr;
	return static_cast<uint8_t *>(mr->mr.addr) + (addr - mr->iova);
}

/* Builds iovecs for [off, off+len) of a local op's data. */
int gather(Runtime *rt, SendOp *op, uint64_t off, uint64_t len, iovec *iov, bool &ok)
{
	ok = true;
	if (len == 0)
		return 0;
	if (op->is_inline) {
		iov[0] = {op->inline_buf + off, size_t(len)};
		return 1;
	}
	int n = 0;
	for (unsigned i = 0; i < op->nsge && len; i++) {
		const Sge &s = op->sge[i];
		if (off >= s.length) {
			off -= s.length;
			continue;
		}
		/* The buffer must still be registered: the application may have lied. */
		if (!sge_valid(rt, op->peer->qp->pd, s, 0)) {
			ok = false;
			return 0;
		}
		uint64_t take = std::min<uint64_t>(s.length - off, len);
		iov[n++] = {reinterpret_cast<void *>(s.addr + off), size_t(take)};
		len -= take;
		off = 0;
	}
	return n;
}

/* Scatters `len` bytes into a local op's buffers at `off`. */
bool scatter(Runtime *rt, Pd *pd, const Sge *sge, unsigned nsge, uint64_t off, const uint8_t *src,
	     uint64_t len)
{
	for (unsigned i = 0; i < nsge && len; i++) {
		const Sge &s = sge[i];
		if (off >= s.length) {
			off -= s.length;
			continue;
		}
		if (!sge_valid(rt, pd, s, IBV_ACCESS_LOCAL_WRITE))
			return false;
		uint64_t take = std::min<uint64_t>(s.length - off, len);
		std::memcpy(reinterpret_cast<void *>(s.addr + off), src, take);
		src += take;
		len -= take;
		off = 0;
	}
	return len == 0;
}

uint32_t npackets(uint64_t len)
{
	uint32_t seg = config().segment;
	return len == 0 ? 1 : uint32_t((len + seg - 1) / seg);
}

/* ---- loopback DMA: RDMA between two QPs of one device, by one copy (README.md)
 *
 * A NIC serves RDMA between two of its own QPs without the wire. Here the two QPs may
 * live in two processes, so the target's device copies, after it has checked the remote
 * key: process_vm_writev() into the initiator's buffer for a read (one PF_PLACED
 * response instead of the data), process_vm_readv() from it for each PF_PULL segment of
 * a write. The initiator offers its buffer with its pid and the address of the work
 * request's proof (kDmaMagic and a token unique to it, cleared when it ends), which the
 * target reads back first, so neither a forged offer, nor a pid reused by another
 * process, nor a work request that already ended (flushed, timed out) gets data copied.
 * Anything that fails falls back to the data crossing the channel: a read streams, a
 * refused pull makes the initiator send the write again with its data (restream). */

/* A value unique to one read of this process, never 0: a random base plus a counter. */
uint64_t next_dma_token()
{
	static const uint64_t base = [] {
		uint64_t v = 0;
		if (getrandom(&v, sizeof v, 0) != sizeof v)
			v = now_ns() * 0x9e3779b97f4a7c15ull ^ uint64_t(getpid());
		return v;
	}();
	static std::atomic<uint64_t> n{0};
	const uint64_t t = base + (n.fetch_add(1) + 1) * 0x9e3779b97f4a7c15ull;
	return t ? t : 1;
}

/* The proof a target reads back from the work request before it copies: kDmaMagic and
 * the work request's token (set once, at its first offer). Returns the token. */
uint64_t arm_proof(SendOp *op)
{
	if (!op->dma_proof[1]) {
		op->dma_proof[0] = kDmaMagic;
		__atomic_store_n(&op->dma_proof[1], next_dma_token(), __ATOMIC_RELEASE);
	}
	return op->dma_proof[1];
}

/* The work request's entries for an offer, each still registered with `access`. */
bool offer_entries(Runtime *rt, Peer *p, const SendOp *op, int access, uint64_t *addr, uint32_t *len)
{
	for (unsigned i = 0; i < op->nsge; i++) {
		if (!sge_valid(rt, p->qp->pd, op->sge[i], access))
			return false;
		addr[i] = op->sge[i].addr;
		len[i] = op->sge[i].length;
	}
	return true;
}

/* Fills the request's offer when the responder is this device and the buffer is
 * registered for local write. The proof (arm_proof) is in the work request itself: it
 * is cleared when the read ends (complete_send), with any status, so a
 * request delivered after its read was flushed or timed out, when the application may
 * have freed the buffer, gets nothing written. */
void offer_dma(Runtime *rt, Peer *p, SendOp *op, ReadReqBody &b)
{
	if (!config().loopback_dma || op->is_inline || !op->nsge || !(p->gid == rt->gid) ||
	    !offer_entries(rt, p, op, IBV_ACCESS_LOCAL_WRITE, b.dma_addr, b.dma_len))
		return;
	b.dma_nsge = op->nsge;
	b.dma_pid = rt->pid;
	b.dma_nonce = arm_proof(op);
	b.dma_nonce_addr = reinterpret_cast<uintptr_t>(op->dma_proof);
}

/* Whether process `pid` holds the proof {kDmaMagic, token} at `addr` (the work request
 * that offered its buffer is outstanding there). A forger who names another process
 * would need an address in it that holds the magic and a token it cannot know. */
bool dma_proof(Runtime *rt, uint32_t pid, uint64_t addr, uint64_t token)
{
	if (!config().loopback_dma || rt->dma_denied || !token)
		return false;
	uint64_t seen[2] = {};
	iovec mine = {seen, sizeof seen};
	iovec theirs = {reinterpret_cast<void *>(uintptr_t(addr)), sizeof seen};
	const ssize_t n = process_vm_readv(pid_t(pid), &mine, 1, &theirs, 1, 0);
	if (n == ssize_t(sizeof seen))
		return seen[0] == kDmaMagic && seen[1] == token;
	if (n < 0 && (errno == ENOSYS || errno == EPERM) && !rt->dma_refused_logged) {
		/* EPERM may be one process (another user's, a reused pid) or all of them (Yama
		 * ptrace scope 1 between processes that are not parent and child): say it once,
		 * keep trying per request. */
		rt->dma_refused_logged = true;
		SIM_INFO("loopback DMA: the kernel refused process_vm_readv into process %u (%s); such RDMA "
			 "streams its data through datagrams (allow cross-process copies, e.g. the Yama ptrace "
			 "scope 0 or CAP_SYS_PTRACE, or set EFASIM_LOOPBACK_DMA=0 to choose this)",
			 pid, strerror(errno));
	}
	if (n < 0 && errno == ENOSYS)
		rt->dma_denied = true;
	return false;
}

/* The device's side of a loopback DMA copy, to or from another process. Like xmit's
 * sendmsg (runtime.cpp), under ThreadSanitizer the local memory is reached only through
 * dma_copy (sim.h): a NIC's DMA is out of its sight too. */
ssize_t dma_to_process(pid_t pid, const uint8_t *src, size_t len, const iovec *remote, unsigned n)
{
#if defined(__SANITIZE_THREAD__)
	thread_local std::vector<uint8_t> staged;
	staged.resize(len);
	dma_copy(staged.data(), src, len);
	src = staged.data();
#endif
	iovec mine = {const_cast<uint8_t *>(src), len};
	return process_vm_writev(pid, &mine, 1, remote, n, 0);
}

ssize_t dma_from_process(pid_t pid, uint8_t *dst, size_t len, const iovec *remote, unsigned n)
{
#if defined(__SANITIZE_THREAD__)
	thread_local std::vector<uint8_t> staged;
	staged.resize(len);
	iovec mine = {staged.data(), len};
	const ssize_t r = process_vm_readv(pid, &mine, 1, remote, n, 0);
	if (r > 0)
		dma_copy(dst, staged.data(), size_t(r));
	return r;
#else
	iovec mine = {dst, len};
	return process_vm_readv(pid, &mine, 1, remote, n, 0);
#endif
}

/* Places [src, src + b.len) in the initiator's offered buffer. False: nothing usable
 * was placed, stream the data instead. */
bool place_dma(Runtime *rt, const ReadReqBody &b, const uint8_t *src)
{
	iovec remote[2];
	uint64_t total = 0;
	for (unsigned i = 0; i < b.dma_nsge; i++) {
		remote[i] = {reinterpret_cast<void *>(uintptr_t(b.dma_addr[i])), b.dma_len[i]};
		total += b.dma_len[i];
	}
	if (total != b.len || !dma_proof(rt, b.dma_pid, b.dma_nonce_addr, b.dma_nonce))
		return false;
	return dma_to_process(pid_t(b.dma_pid), src, size_t(b.len), remote, b.dma_nsge) == ssize_t(b.len);
}

/* Writes of at least this many bytes to this device are pulled by the target: below it,
 * two system calls at the target cost more than the data's trip through the socket. */
constexpr uint64_t kPullMin = 16384;

/* The offer for segment f of a pulled write. False: a buffer is no longer registered. */
bool offer_pull(Runtime *rt, Peer *p, SendOp *op, const Inflight &f, PullOffer &o)
{
	if (!offer_entries(rt, p, op, 0, o.addr, o.len))
		return false;
	o.pid = rt->pid;
	o.nsge = op->nsge;
	o.token = arm_proof(op);
	o.token_addr = reinterpret_cast<uintptr_t>(op->dma_proof);
	o.seg_len = f.len;
	return true;
}

/* Copies bytes [off, off + o.seg_len) of the initiator's offered buffer to dst. */
bool pull_dma(Runtime *rt, const PullOffer &o, uint64_t off, uint8_t *dst)
{
	iovec remote[2];
	unsigned n = 0;
	uint64_t want = o.seg_len;
	for (unsigned i = 0; i < o.nsge && want; i++) {
		if (off >= o.len[i]) {
			off -= o.len[i];
			continue;
		}
		const uint64_t take = std::min<uint64_t>(o.len[i] - off, want);
		remote[n++] = {reinterpret_cast<void *>(uintptr_t(o.addr[i] + off)), size_t(take)};
		want -= take;
		off = 0;
	}
	if (want || !dma_proof(rt, o.pid, o.token_addr, o.token))
		return false;
	return !o.seg_len || dma_from_process(pid_t(o.pid), dst, o.seg_len, remote, n) == ssize_t(o.seg_len);
}

uint32_t segment_of(const TxJob *job)
{
	return job->local && static_cast<const SendOp *>(job)->pull ? kPullSegment : config().segment;
}

} // namespace

/* ------------------------------------------------------------------ peers */

Peer *Runtime::peer_for(Qp *qp, const Gid &gid, uint32_t qpn, bool create)
{
	if (Peer *lp = qp->last_peer; lp && lp->qpn == qpn && lp->gid == gid)
		return lp;
	auto it = qp->peers.find(PeerKey{gid, qpn});
	if (it != qp->peers.end()) {
		qp->last_peer = it->second;
		return it->second;
	}
	if (!create || qp->peers.size() >= config().max_peers)
		return nullptr;
	sockaddr_in sa;
	if (!gid_to_sockaddr(gid, qpn, sa))
		return nullptr;
	auto *p = new Peer();
	p->qp = qp;
	p->gid = gid;
	p->qpn = qpn;
	p->sa = sa;
	p->epoch = new_epoch();
	p->rto_ns = uint64_t(config().rto_us) * 1000;
	p->deadline = UINT64_MAX;
	qp->peers.emplace(PeerKey{gid, qpn}, p);
	qp->last_peer = p;
	return p;
}

void Runtime::destroy_peers(Qp *qp)
{
	/* flush_qp() ran first: no job is queued or in flight any more. */
	if (txb.peer && txb.peer->qp == qp)
		flush_tx();
	for (auto &[k, p] : qp->peers) {
		if (p->active) {
			auto it = std::find(active.begin(), active.end(), p);
			if (it != active.end()) {
				*it = active.back();
				active.pop_back();
			}
		}
		delete p;
	}
	qp->peers.clear();
	qp->last_peer = nullptr;
}

/* ------------------------------------------------------------------ transmit */

namespace {

void transmit(Runtime *rt, Peer *p, Inflight &f)
{
	TxJob *job = f.job;
	WireHdr h;
	iovec iov[6];
	int n = 1;
	union {
		SendBody send;
		WriteBody write;
		ReadReqBody rreq;
		ReadRespBody rresp;
	} body;
	std::memset(&body, 0, sizeof body);
	PullOffer pull{};
	bool ok = true;
	size_t bsz = body_size(f.type);
	uint64_t payload = 0;

	iov[n++] = {&body, bsz};
	switch (f.type) {
	case PKT_SEND: {
		auto *op = static_cast<SendOp *>(job);
		body.send.msg_len = uint32_t(op->len);
		body.send.imm = op->imm;
		body.send.sl = p->qp->sl;
		body.send.rnr_try = uint8_t(f.rnr_tries);
		n += gather(rt, op, 0, op->len, &iov[n], ok);
		payload = op->len;
		break;
	}
	case PKT_WRITE: {
		auto *op = static_cast<SendOp *>(job);
		body.write.rkey = op->rkey;
		body.write.imm = op->imm;
		body.write.raddr = op->raddr;
		body.write.total_len = op->len;
		body.write.offset = f.off;
		body.write.last = f.last;
		body.write.sl = p->qp->sl;
		body.write.rnr_try = uint8_t(f.rnr_tries);
		if (op->pull) {
			ok = offer_pull(rt, p, op, f, pull);
			iov[n++] = {&pull, sizeof pull};
			payload = sizeof pull;
			break;
		}
		n += gather(rt, op, f.off, f.len, &iov[n], ok);
		payload = f.len;
		break;
	}
	case PKT_READ_REQ: {
		auto *op = static_cast<SendOp *>(job);
		body.rreq.rkey = op->rkey;
		body.rreq.op_id = op->op_id();
		body.rreq.raddr = op->raddr;
		body.rreq.len = op->len;
		offer_dma(rt, p, op, body.rreq);
		break;
	}
	case PKT_READ_RESP: {
		auto *rr = static_cast<ReadResp *>(job);
		body.rresp.op_id = rr->op_id;
		body.rresp.offset = f.off;
		if (rr->placed)
			break; /* the data is there already (place_dma) */
		/* Re-check the key on every (re)transmission: the MR may be gone by now. */
		uint8_t *src = remote_target(rt, p->qp, rr->rkey, rr->raddr, rr->len, IBV_ACCESS_REMOTE_READ);
		if (!src) {
			body.rresp.reserved = EFA_REMOTE_BAD_ADDRESS;
		} else if (f.len) {
			iov[n++] = {src + f.off, f.len};
			payload = f.len;
		}
		if (!f.tries)
			rt->stats.rdma_read_bytes += f.len;
		break;
	}
	}
	if (!ok) {
		/* Local buffer deregistered under an outstanding work request. */
		if (job->status == EFA_OK)
			job->status = EFA_LOCAL_INVALID_LKEY;
		return;
	}
	header(rt, p, h, f.type, uint32_t(bsz + payload));
	h.seq = f.seq;
	h.path = f.path;
	if (job->local)
		h.qkey = static_cast<SendOp *>(job)->rqkey;
	if (job->op == OP_SEND_IMM || (job->op == OP_WRITE_IMM && f.last))
		h.flags |= PF_IMM;
	if (job->local && static_cast<SendOp *>(job)->hints)
		h.flags |= PF_HINT;
	if (f.type == PKT_READ_RESP && static_cast<ReadResp *>(job)->placed)
		h.flags |= PF_PLACED;
	if (pull.pid)
		h.flags |= PF_PULL;
	iov[0] = {&h, sizeof h};
	rt->xmit(p->qp, p->sa, iov, n, p);
}

} // namespace

void Runtime::plan_write(Peer *p, SendOp *op)
{
	const Config &c = config();
	op->pull = c.loopback_dma && !dma_denied && !op->is_inline && op->len >= kPullMin && !p->no_pull &&
		   p->gid == gid;
	const uint64_t seg = segment_of(op);
	op->pkts_total = op->len == 0 ? 1 : uint32_t((op->len + seg - 1) / seg);
	op->pkts_sent = 0;
}

void Runtime::enqueue(Peer *p, TxJob *job)
{
	job->peer = p;
	job->qnext = nullptr;
	job->queued = true;
	if (p->txq_tail)
		p->txq_tail->qnext = job;
	else
		p->txq_head = job;
	p->txq_tail = job;
	pump(p);
}

void Runtime::pump(Peer *p)
{
	const Config &c = config();
	const uint64_t now = now_ns();
	/* Several packets to emit (a multi-packet job, or more than one job queued: after
	 * an acknowledgement opened the window): they leave together (TxBatch). */
	const TxJob *h = p->txq_head;
	TxScope batch(this, h && (h->qnext || h->pkts_total - h->pkts_sent > 1));
	TxJob *prev = nullptr;
	for (TxJob *job = p->txq_head; job;) {
		bool blocked = false;
		while (job->status == EFA_OK && job->pkts_sent < job->pkts_total) {
			if (p->next_seq - p->una >= c.window_pkts || p->inflight_bytes >= c.window_bytes)
				return;
			const bool last = job->pkts_sent + 1 == job->pkts_total;
			/* The immediate of a write completes it at the target: it goes last, alone. */
			if (job->op == OP_WRITE_IMM && last && job->pkts_out > 0) {
				blocked = true;
				break;
			}
			ring_reserve(p);
			const uint32_t seq = p->next_seq++;
			Inflight &f = p->ring[seq & ring_mask(p)];
			f = Inflight{};
			f.job = job;
			f.seq = seq;
			f.first_ns = now;
			f.due_ns = now + p->rto_ns;
			f.state = IF_SENT;
			f.path = uint8_t(p->path_rr++ % c.paths);
			switch (job->op) {
			case OP_SEND:
			case OP_SEND_IMM:
				f.type = PKT_SEND;
				f.len = uint32_t(job->len);
				break;
			case OP_READ:
				f.type = PKT_READ_REQ;
				p->reads_waiting++;
				break;
			case OP_WRITE:
			case OP_WRITE_IMM:
			case OP_READ_RESP: {
				f.type = job->op == OP_READ_RESP ? PKT_READ_RESP : PKT_WRITE;
				const uint32_t seg = segment_of(job);
				f.off = uint64_t(job->pkts_sent) * seg;
				f.len = uint32_t(std::min<uint64_t>(seg, job->len - std::min(job->len, f.off)));
				if (job->op == OP_READ_RESP && static_cast<ReadResp *>(job)->placed)
					f.len = 0;
				f.last = last;
				break;
			}
			}
			job->pkts_sent++;
			job->pkts_out++;
			p->inflight_bytes += f.len;
			p->inflight++;
			transmit(this, p, f);
			arm_timer(p, f.due_ns);
		}
		TxJob *next = job->qnext;
		if (!blocked) {
			/* Everything emitted (or failed): off the queue. */
			job->queued = false;
			if (prev)
				prev->qnext = next;
			else
				p->txq_head = next;
			if (p->txq_tail == job)
				p->txq_tail = prev;
			if (job->pkts_out == 0) {
				/* Failed before emitting anything. */
				if (job->local)
					complete_send(static_cast<SendOp *>(job));
				else
					delete static_cast<ReadResp *>(job);
			}
		} else {
			prev = job;
		}
		job = next;
	}
}

/* ------------------------------------------------------------------ acknowledgements */

namespace {

void job_finished(Runtime *rt, TxJob *job)
{
	if (job->pkts_out || job->queued)
		return;
	if (job->status == EFA_OK && job->pkts_sent < job->pkts_total)
		return;
	if (!job->local) {
		delete static_cast<ReadResp *>(job);
		return;
	}
	auto *op = static_cast<SendOp *>(job);
	if (op->op == OP_READ && op->status == EFA_OK && op->bytes_to_recv)
		return; /* request delivered; the data is on its way */
	rt->complete_send(op);
}

/* Takes slot f out of the channel's accounting; its job is told nothing. */
void free_slot(Peer *p, Inflight &f)
{
	f.job->pkts_out--;
	f.state = IF_FREE;
	f.job = nullptr;
	p->inflight--;
	p->inflight_bytes -= f.len;
}

void release_slot(Runtime *rt, Peer *p, Inflight &f, uint8_t status)
{
	TxJob *job = f.job;
	free_slot(p, f);
	if (status != EFA_OK && job->status == EFA_OK) {
		job->status = status;
		if (job->op == OP_READ && job->local)
			static_cast<SendOp *>(job)->bytes_to_recv = 0;
	}
	job_finished(rt, job);
}

void advance_una(Peer *p)
{
	const uint32_t mask = ring_mask(p);
	while (p->una != p->next_seq && p->ring[p->una & mask].state == IF_FREE)
		p->una++;
	ring_release_if_idle(p);
}

/*
 * Round-trip estimate (Jacobson/Karels, RFC 6298) from packets acknowledged on their
 * first transmission (Karn). The retransmission timeout follows queueing delay, so a
 * deep window on a busy host does not retransmit spuriously.
 */
void rtt_sample(Peer *p, uint64_t rtt)
{
	const Config &c = config();
	if (!p->srtt_ns) {
		p->srtt_ns = rtt;
		p->rttvar_ns = rtt / 2;
	} else {
		const uint64_t err = rtt > p->srtt_ns ? rtt - p->srtt_ns : p->srtt_ns - rtt;
		p->rttvar_ns = (3 * p->rttvar_ns + err) / 4;
		p->srtt_ns = (7 * p->srtt_ns + rtt) / 8;
	}
	const uint64_t rto = p->srtt_ns + 4 * p->rttvar_ns;
	p->rto_ns = std::clamp<uint64_t>(rto, uint64_t(c.rto_us) * 1000, uint64_t(c.rto_max_us) * 1000);
}

void on_ack(Runtime *rt, Peer *p, const WireHdr *h)
{
	if (h->ack_epoch != p->epoch || p->ring.empty())
		return;
	const uint32_t mask = ring_mask(p);
	const uint64_t now = now_ns();
	uint64_t newest = 0;
	for (uint32_t s = p->una; s != p->next_seq; s++) {
		Inflight &f = p->ring[s & mask];
		if (f.state == IF_FREE || f.seq != s)
			continue;
		bool acked = seq_lt(s, h->ack_cum);
		if (!acked && seq_lt(h->ack_cum, s)) {
			uint32_t i = s - h->ack_cum - 1;
			acked = i < kSackBits && (h->ack_sack[i / 64] >> (i % 64) & 1);
		}
		if (acked) {
			if (f.state == IF_SENT && !f.tries && !f.rnr_tries)
				newest = std::max(newest, f.first_ns);
			release_slot(rt, p, f, EFA_OK);
		}
	}
	if (newest && now > newest)
		rtt_sample(p, now - newest);
	advance_una(p);
}

/*
 * The target refused to pull a segment of `op` (it cannot reach our memory): the whole
 * write is sent again with its data, from the start, and so is every later write to
 * that peer. Its pulled segments still in flight are abandoned (the receiver learns it
 * from snd_una); one the target already copied is written again with the same bytes.
 * The last segment of a write with immediate goes alone after all others were
 * acknowledged, so a refusal always comes before the immediate was delivered.
 */
void restream(Runtime *rt, Peer *p, SendOp *op)
{
	p->no_pull = true;
	op->pull = false;
	for (Inflight &f : p->ring)
		if (f.state != IF_FREE && f.job == op)
			free_slot(p, f);
	advance_una(p);
	const bool queued = op->queued;
	rt->plan_write(p, op);
	if (!queued)
		rt->enqueue(p, op);
}

void on_nak(Runtime *rt, Peer *p, const WireHdr *h, const NakBody *nb)
{
	if (!(h->flags & PF_ACK) || h->ack_epoch != p->epoch || p->ring.empty())
		return;
	Inflight &f = p->ring[nb->seq & ring_mask(p)];
	if (f.state == IF_FREE || f.seq != nb->seq)
		return;
	if (nb->status == kNakPullRefused) {
		if (f.type == PKT_WRITE && f.job->local && static_cast<SendOp *>(f.job)->pull)
			restream(rt, p, static_cast<SendOp *>(f.job));
		return;
	}
	const uint64_t now = now_ns();
	if (nb->status == EFA_REMOTE_RNR) {
		rt->stats.rnr_naks_received++;
		/* A NAK of an earlier attempt (answering a retransmitted copy) says nothing new. */
		if (nb->rnr_try != uint8_t(f.rnr_tries))
			return;
		const uint8_t retry = p->qp->rnr_retry;
		if (f.state == IF_SENT && (retry == 7 || f.rnr_tries < retry)) {
			f.rnr_tries++;
			f.state = IF_RNR_WAIT;
			f.first_ns = now; /* the peer is alive: restart the unresponsiveness clock */
			f.due_ns = now + uint64_t(config().rnr_delay_us) * 1000;
			rt->arm_timer(p, f.due_ns);
			return;
		}
		if (f.state == IF_RNR_WAIT)
			return;
	}
	release_slot(rt, p, f, nb->status);
	advance_una(p);
}

} // namespace

void Runtime::send_ack(Peer *p)
{
	SIM_DEBUG("QP %u -> %u: ack cum %u", p->qp->qpn, p->qpn, p->rx_base);
	WireHdr h;
	header(this, p, h, PKT_ACK, 0);
	iovec iov{&h, sizeof h};
	stats.acks_sent++;
	xmit(p->qp, p->sa, &iov, 1, p);
}

void Runtime::send_nak(Peer *p, uint32_t seq, uint8_t status, uint8_t rnr_try)
{
	WireHdr h;
	NakBody nb{};
	header(this, p, h, PKT_NAK, sizeof nb);
	nb.seq = seq;
	nb.status = status;
	nb.rnr_try = rnr_try;
	iovec iov[2] = {{&h, sizeof h}, {&nb, sizeof nb}};
	xmit(p->qp, p->sa, iov, 2, p);
}

void Runtime::complete_send(SendOp *op)
{
	if (op->op == OP_READ && op->peer && op->peer->reads_waiting && op->pkts_sent)
		op->peer->reads_waiting--;
	Qp *owner = op->owner;
	if (!owner->quiet && (op->signaled || op->status != EFA_OK)) {
		Cqe e{};
		e.wr_id = op->wr_id;
		e.status = op->status;
		e.opcode = (op->op == OP_WRITE || op->op == OP_WRITE_IMM) ? IBV_WC_RDMA_WRITE : IBV_WC_SEND;
		e.byte_len = uint32_t(op->len);
		push_cqe(owner, owner->scq, e);
	}
	__atomic_store_n(&op->dma_proof[1], 0, __ATOMIC_RELEASE); /* arm_proof() */
	op->dma_proof[0] = 0;
	op->in_use = false;
	op->gen++;
	owner->sq_free.push_back(op->slot);
}

void Runtime::fail_peer(Peer *p, uint8_t status)
{
	stats.peer_timeouts++;
	SIM_INFO("efasim%d: QP %u: peer QP %u %s: failing its work requests", index, p->qp->qpn, p->qpn,
		 status == EFA_LOCAL_UNREACH_REMOTE ? "never answered" : "stopped answering");
	Qp *qp = p->qp;
	/* Ops still queued stop emitting. */
	for (TxJob *j = p->txq_head; j; j = j->qnext)
		if (j->status == EFA_OK)
			j->status = status;
	for (Inflight &f : p->ring)
		if (f.state != IF_FREE)
			release_slot(this, p, f, status);
	/* Reads whose request was delivered but whose data never came. */
	for (SendOp &op : qp->sq) {
		if (op.in_use && op.peer == p && op.op == OP_READ && !op.pkts_out && !op.queued &&
		    op.bytes_to_recv) {
			op.status = status;
			op.bytes_to_recv = 0;
			complete_send(&op);
		}
	}
	p->reads_waiting = 0;
	/* Start over with a new channel: the receiver resets on the new epoch. */
	p->epoch = new_epoch();
	p->next_seq = p->una = 0;
	p->inflight = 0;
	p->inflight_bytes = 0;
	p->rto_ns = uint64_t(config().rto_us) * 1000;
	p->srtt_ns = p->rttvar_ns = 0;
	pump(p);
}

void Runtime::peer_timer(Peer *p, uint64_t now)
{
	const Config &c = config();
	const uint64_t timeout = uint64_t(c.timeout_ms) * 1000000;
	uint64_t deadline = UINT64_MAX;
	if (p->inflight) {
		const uint32_t mask = ring_mask(p);
		for (uint32_t s = p->una; s != p->next_seq; s++) {
			Inflight &f = p->ring[s & mask];
			if (f.state == IF_FREE)
				continue;
			if (f.due_ns <= now) {
				if (f.state == IF_SENT && int64_t(now - f.first_ns) >= int64_t(timeout)) {
					fail_peer(p, p->heard ? EFA_LOCAL_UNRESP_REMOTE : EFA_LOCAL_UNREACH_REMOTE);
					return peer_timer(p, now);
				}
				if (f.state == IF_RNR_WAIT) {
					stats.rnr_retries++;
					f.state = IF_SENT;
					f.due_ns = now + p->rto_ns;
				} else {
					stats.retransmits++;
					SIM_DEBUG("QP %u -> %u: retransmit seq %u type %u (try %u, rto %lu us)", p->qp->qpn,
						  p->qpn, f.seq, f.type, f.tries + 1, (unsigned long)(p->rto_ns / 1000));
					f.tries++;
					uint64_t backoff = p->rto_ns << std::min<uint16_t>(f.tries, 16);
					f.due_ns = now + std::min<uint64_t>(backoff, uint64_t(c.rto_max_us) * 1000);
					/* Never wait past the moment the peer is declared dead. */
					f.due_ns = std::min(f.due_ns, f.first_ns + timeout);
				}
				transmit(this, p, f);
			}
			deadline = std::min(deadline, f.due_ns);
		}
	}
	if (p->reads_waiting && !p->inflight) {
		if (int64_t(now - p->last_rx_ns) >= int64_t(timeout)) {
			fail_peer(p, EFA_LOCAL_UNRESP_REMOTE);
			return peer_timer(p, now);
		}
		deadline = std::min(deadline, p->last_rx_ns + timeout);
	}
	if (p->ack_pending) {
		if (p->ack_due_ns <= now)
			send_ack(p);
		else
			deadline = std::min(deadline, p->ack_due_ns);
	}
	p->deadline = deadline;
}

/* ------------------------------------------------------------------ receive */

namespace {

enum : uint8_t { DELIVER_DROP = 0xff };

/* The refusals a peer may still retransmit into (Peer::naks). */
NakRecord *nak_find(Peer *p, uint32_t seq)
{
	for (NakRecord &n : p->naks)
		if (n.seq == seq)
			return &n;
	return nullptr;
}

void nak_record(Peer *p, const NakRecord &rec)
{
	if (NakRecord *n = nak_find(p, rec.seq))
		*n = rec;
	else
		p->naks.push_back(rec);
}

void naks_clear(Peer *p) { std::vector<NakRecord>().swap(p->naks); }

void nak_forget(Peer *p, NakRecord &n)
{
	n = p->naks.back();
	p->naks.pop_back();
	if (p->naks.empty())
		naks_clear(p); /* an idle peer holds no table */
}

void rx_advance_to(Peer *p, uint32_t to)
{
	if (!seq_lt(p->rx_base, to))
		return;
	uint32_t shift = to - p->rx_base;
	if (shift >= kRxWindow) {
		p->rx_words = 0;
	} else {
		/* shift the bitmap down by `shift` bits (words from rx_words up are zero) */
		const unsigned words = p->rx_words;
		const unsigned ws = shift / 64, bs = shift % 64;
		for (unsigned i = 0; i < words; i++) {
			uint64_t lo = i + ws < words ? p->rx_bits[i + ws] : 0;
			uint64_t hi = i + ws + 1 < words ? p->rx_bits[i + ws + 1] : 0;
			p->rx_bits[i] = bs ? (lo >> bs) | (hi << (64 - bs)) : lo;
		}
		p->rx_words = words > ws ? words - ws : 0;
	}
	if (!p->naks.empty()) {
		/* Every record lies in [rx_base, rx_base + kRxWindow): those below `to` go. */
		if (shift < kRxWindow)
			std::erase_if(p->naks, [to](const NakRecord &n) { return seq_lt(n.seq, to); });
		if (shift >= kRxWindow || p->naks.empty())
			naks_clear(p);
	}
	p->rx_base = to;
	/* rx_base is the first sequence number not received (acknowledgements say so: the
	 * selective bits start after it). Moved by the sender's snd_una past numbers it
	 * abandoned, it may now sit on ones received earlier: slide over them. */
	uint32_t n = 0;
	for (unsigned w = 0; w < p->rx_words; w++) {
		const uint64_t run = std::countr_one(p->rx_bits[w]);
		n += uint32_t(run);
		if (run < 64)
			break;
	}
	if (n)
		rx_advance_to(p, to + n);
	else if (!p->rx_words)
		p->rx_bits.reset();
}

void rx_mark(Peer *p, uint32_t seq)
{
	uint32_t d = seq - p->rx_base;
	if (d == 0 && !p->rx_words) {
		rx_advance_to(p, p->rx_base + 1); /* in order, nothing received beyond: no bitmap */
		return;
	}
	if (!p->rx_bits)
		p->rx_bits.reset(new uint64_t[kRxWindow / 64]());
	p->rx_bits[d / 64] |= 1ull << (d % 64);
	p->rx_words = std::max(p->rx_words, d / 64 + 1);
	if (d == 0)
		rx_advance_to(p, p->rx_base + 1); /* and over the received run after it */
}

uint16_t slid_for(Runtime *rt, Qp *qp, const Gid &gid, Cqe &e)
{
	uint16_t ahn;
	if (rt->pd_has_ah(qp->pd, gid, &ahn))
		return ahn;
	e.has_sgid = 1;
	e.sgid = gid;
	return 0xffff;
}

} // namespace

void Runtime::process_datagram(Qp *qp, const uint8_t *buf, size_t len, const sockaddr_in &from)
{
	Parsed pk;
	if (!parse(buf, len, pk) || pk.hdr->dst_qpn != qp->qpn || !check_body(pk, config().mtu, config().segment)) {
		stats.malformed++;
		return;
	}
	const WireHdr *h = pk.hdr;
	Gid sgid;
	std::memcpy(sgid.raw, h->src_gid, 16);
	sockaddr_in expect;
	if (!gid_to_sockaddr(sgid, h->src_qpn, expect) || expect.sin_addr.s_addr != from.sin_addr.s_addr ||
	    expect.sin_port != from.sin_port) {
		stats.malformed++; /* source address does not match the claimed GID/QPN */
		return;
	}
	stats.rx_packets++;
	stats.rx_bytes += len;
	if (h->type == PKT_UD_SEND || qp->ud) {
		ud_receive(this, qp, pk, sgid); /* no channel, no acknowledgement (ud.cpp) */
		return;
	}
	const ibv_qp_state st = qp->state();
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT)
		return; /* not yet able to receive: silently dropped, as on hardware */

	Peer *p = peer_for(qp, sgid, h->src_qpn, true);
	if (!p)
		return;
	const uint64_t now = now_ns();
	p->heard = true;
	p->last_rx_ns = now;

	if (h->flags & PF_ACK) {
		on_ack(this, p, h);
		if (p->txq_head)
			pump(p);
	}
	if (h->type == PKT_ACK)
		return;
	if (h->type == PKT_NAK) {
		on_nak(this, p, h, reinterpret_cast<const NakBody *>(pk.body));
		pump(p);
		return;
	}

	/* ---- a data packet */
	if (!p->rx_valid || h->epoch != p->rx_epoch) {
		if (p->rx_valid && seq_lt(h->epoch, p->rx_epoch))
			return; /* from an abandoned channel */
		p->rx_valid = true;
		p->rx_epoch = h->epoch;
		p->rx_base = h->snd_una;
		p->rx_highest = h->snd_una;
		p->rx_bits.reset();
		p->rx_words = 0;
		naks_clear(p);
	}
	rx_advance_to(p, h->snd_una);
	const uint32_t seq = h->seq;
	auto schedule_ack = [&] {
		p->ack_pending++;
		if (p->ack_pending >= config().ack_every || config().ack_delay_us == 0) {
			send_ack(p);
		} else if (!p->ack_due_ns) {
			p->ack_due_ns = now + uint64_t(config().ack_delay_us) * 1000;
			arm_timer(p, p->ack_due_ns);
		}
	};
	if (seq_lt(seq, p->rx_base)) {
		SIM_DEBUG("QP %u <- %u: duplicate seq %u (rx_base %u)", qp->qpn, p->qpn, seq, p->rx_base);
		stats.duplicates++;
		schedule_ack();
		return;
	}
	const uint32_t d = seq - p->rx_base;
	if (d >= kRxWindow)
		return; /* beyond the window: the sender will retransmit */
	if (p->rx_bits && p->rx_bits[d / 64] >> (d % 64) & 1) {
		stats.duplicates++;
		schedule_ack();
		return;
	}
	/* The attempt this copy belongs to (RNR retries are attempts 1, 2, ...). */
	uint8_t attempt = 0;
	if (h->type == PKT_SEND)
		attempt = reinterpret_cast<const SendBody *>(pk.body)->rnr_try;
	else if (h->type == PKT_WRITE)
		attempt = reinterpret_cast<const WriteBody *>(pk.body)->rnr_try;
	if (NakRecord *n = p->naks.empty() ? nullptr : nak_find(p, seq)) {
		/*
		 * A copy of an attempt already refused for lack of a receive buffer (a
		 * retransmission that crossed the NAK) must not be delivered now: the sender
		 * may have given up on it. Only a newer attempt is.
		 */
		if (n->status != EFA_REMOTE_RNR || int8_t(attempt - n->rnr_try) <= 0) {
			send_nak(p, seq, n->status, n->rnr_try);
			return;
		}
		nak_forget(p, *n);
	}
	if (seq_lt(seq, p->rx_highest))
		stats.out_of_order++;
	else
		p->rx_highest = seq + 1;

	uint8_t status;
	ReadResp *resp = nullptr;
	if (h->type != PKT_READ_RESP && h->qkey != qp->qkey) {
		/* Delivered by SRD, refused by the QP: acknowledged, dropped, counted. */
		stats.qkey_drops++;
		status = EFA_OK;
	} else if (st == IBV_QPS_ERR || st == IBV_QPS_SQE) {
		status = EFA_REMOTE_BAD_DEST_QPN;
	} else {
		status = EFA_OK;
		const Profile &prof = *config().profile;
		switch (h->type) {
		case PKT_SEND: {
			const auto *b = reinterpret_cast<const SendBody *>(pk.body); /* check_body()ed */
			if (!qp->rq_count) {
				status = EFA_REMOTE_RNR;
				break;
			}
			RecvWr &wr = qp->rq[qp->rq_head];
			qp->rq_head = (qp->rq_head + 1) % uint32_t(qp->rq.size());
			qp->rq_count--;
			Cqe e{};
			e.wr_id = wr.wr_id;
			e.opcode = IBV_WC_RECV;
			e.byte_len = b->msg_len;
			e.src_qp = h->src_qpn;
			/* sl stays 0: rdma-core reports 0 (EFA's completion has no sl) */
			e.slid = slid_for(this, qp, sgid, e);
			if (h->flags & PF_IMM) {
				e.imm = b->imm;
				e.wc_flags = IBV_WC_WITH_IMM;
			}
			uint64_t cap = 0;
			for (unsigned i = 0; i < wr.nsge; i++)
				cap += wr.sge[i].length;
			if (b->msg_len > cap) {
				e.status = EFA_LOCAL_BAD_LENGTH;
				status = EFA_REMOTE_BAD_LENGTH;
			} else if (!scatter(this, qp->pd, wr.sge, wr.nsge, 0, pk.payload, pk.payload_len)) {
				e.status = EFA_LOCAL_INVALID_LKEY;
				status = EFA_REMOTE_BAD_STATUS;
			}
			push_cqe(qp, qp->rcq, e);
			break;
		}
		case PKT_WRITE: {
			const auto *b = reinterpret_cast<const WriteBody *>(pk.body); /* check_body()ed */
			if (!(prof.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE)) {
				status = EFA_REMOTE_FEATURE_MISMATCH;
				break;
			}
			if (!pd_has_ah(qp->pd, sgid, nullptr)) {
				status = EFA_REMOTE_UNKNOWN_PEER;
				break;
			}
			/* Every segment checks the whole write: a bad write touches nothing. */
			uint8_t *dst = remote_target(this, qp, b->rkey, b->raddr, b->total_len, IBV_ACCESS_REMOTE_WRITE);
			if (!dst) {
				status = EFA_REMOTE_BAD_ADDRESS;
				break;
			}
			const bool imm = (h->flags & PF_IMM) && b->last;
			const bool unsol = qp->efa_flags & EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV;
			if (imm && !unsol && !qp->rq_count) {
				status = EFA_REMOTE_RNR;
				break;
			}
			uint64_t placed = pk.payload_len;
			if (h->flags & PF_PULL) {
				PullOffer o;
				std::memcpy(&o, pk.payload, sizeof o); /* check_body()ed */
				if (!(sgid == gid) || !pull_dma(this, o, b->offset, dst + b->offset)) {
					stats.dma_refused++;
					status = kNakPullRefused;
					break;
				}
				placed = o.seg_len;
				stats.dma_bytes += placed;
			} else if (pk.payload_len) {
				dma_copy(dst + b->offset, pk.payload, pk.payload_len);
			}
			stats.rdma_write_bytes += placed;
			if (imm) {
				Cqe e{};
				if (unsol) {
					e.unsolicited = 1;
					stats.unsolicited_recvs++;
				} else {
					e.wr_id = qp->rq[qp->rq_head].wr_id;
					qp->rq_head = (qp->rq_head + 1) % uint32_t(qp->rq.size());
					qp->rq_count--;
				}
				e.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
				e.byte_len = uint32_t(b->total_len);
				e.imm = b->imm;
				e.wc_flags = IBV_WC_WITH_IMM;
				e.src_qp = h->src_qpn;
				/* sl stays 0, as rdma-core reports it */
				e.slid = slid_for(this, qp, sgid, e);
				push_cqe(qp, qp->rcq, e);
			}
			break;
		}
		case PKT_READ_REQ: {
			const auto *b = reinterpret_cast<const ReadReqBody *>(pk.body);
			if (!(prof.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ)) {
				status = EFA_REMOTE_FEATURE_MISMATCH;
				break;
			}
			if (!pd_has_ah(qp->pd, sgid, nullptr)) {
				status = EFA_REMOTE_UNKNOWN_PEER;
				break;
			}
			if (b->len > config().max_rdma_size) {
				status = EFA_REMOTE_BAD_LENGTH;
				break;
			}
			const uint8_t *src = remote_target(this, qp, b->rkey, b->raddr, b->len, IBV_ACCESS_REMOTE_READ);
			if (!src) {
				status = EFA_REMOTE_BAD_ADDRESS;
				break;
			}
			if (b->len) {
				resp = new ReadResp();
				resp->op = OP_READ_RESP;
				resp->local = false;
				resp->rkey = b->rkey;
				resp->raddr = b->raddr;
				resp->len = b->len;
				resp->op_id = b->op_id;
				resp->pkts_total = npackets(b->len);
				if (b->dma_pid && sgid == gid && place_dma(this, *b, src)) {
					resp->placed = true;
					resp->pkts_total = 1;
					stats.rdma_read_bytes += b->len;
					stats.dma_bytes += b->len;
				} else if (b->dma_pid) {
					stats.dma_refused++;
				}
			}
			break;
		}
		case PKT_READ_RESP: {
			const auto *b = reinterpret_cast<const ReadRespBody *>(pk.body);
			const uint32_t slot = b->op_id & 0xffff;
			if (slot >= qp->sq.size())
				break;
			SendOp &op = qp->sq[slot];
			if (!op.in_use || op.op_id() != b->op_id || op.op != OP_READ || op.peer != p ||
			    op.status != EFA_OK)
				break; /* stale: the read already ended */
			if (h->flags & PF_PLACED) {
				if (!op.dma_proof[1]) {
					stats.malformed++;
					return;
				}
				/* Placed by the responder; the buffer must still be registered. */
				for (unsigned i = 0; i < op.nsge; i++)
					if (!sge_valid(this, qp->pd, op.sge[i], IBV_ACCESS_LOCAL_WRITE))
						op.status = EFA_LOCAL_INVALID_LKEY;
				op.bytes_to_recv = 0;
			} else if (b->reserved) {
				op.status = uint8_t(b->reserved);
				op.bytes_to_recv = 0;
			} else if (!read_resp_fits(b->offset, pk.payload_len, op.len, op.bytes_to_recv)) {
				stats.malformed++;
				return;
			} else if (!scatter(this, qp->pd, op.sge, op.nsge, b->offset, pk.payload, pk.payload_len)) {
				op.status = EFA_LOCAL_INVALID_LKEY;
				op.bytes_to_recv = 0;
			} else {
				op.bytes_to_recv -= pk.payload_len;
			}
			if (!op.bytes_to_recv)
				job_finished(this, &op);
			break;
		}
		}
	}

	SIM_DEBUG("QP %u <- %u: seq %u type %u status %u (rx_base %u)", qp->qpn, p->qpn, seq, h->type, status,
		  p->rx_base);
	if (status == EFA_OK) {
		rx_mark(p, seq);
		schedule_ack();
		if (resp)
			enqueue(p, resp);
	} else if (status == kNakPullRefused) {
		/* Nothing remembered: the initiator streams the write instead (on_nak). */
		send_nak(p, seq, status);
	} else if (status == EFA_REMOTE_RNR) {
		stats.rnr_naks_sent++;
		nak_record(p, NakRecord{seq, status, attempt});
		send_nak(p, seq, status, attempt);
	} else {
		stats.remote_errors++;
		nak_record(p, NakRecord{seq, status, 0});
		send_nak(p, seq, status);
	}
}

void Runtime::flush_qp(Qp *qp)
{
	/* Queued and in-flight work of this QP ends with FLUSHED (no completion while the QP
	 * is being destroyed: complete_send() checks Qp::destroying). */
	for (auto &[k, p] : qp->peers) {
		for (TxJob *j = p->txq_head; j; j = j->qnext)
			if (j->status == EFA_OK)
				j->status = EFA_FLUSHED;
		for (Inflight &f : p->ring)
			if (f.state != IF_FREE)
				release_slot(this, p, f, EFA_FLUSHED);
		for (TxJob *j = p->txq_head; j;) {
			TxJob *n = j->qnext;
			j->queued = false;
			if (!j->local && !j->pkts_out)
				delete static_cast<ReadResp *>(j);
			j = n;
		}
		p->txq_head = p->txq_tail = nullptr;
		p->reads_waiting = 0;
		p->epoch = new_epoch();
		p->next_seq = p->una = 0;
		p->inflight = 0;
		p->inflight_bytes = 0;
	}
	for (SendOp &op : qp->sq) {
		if (!op.in_use)
			continue;
		op.status = EFA_FLUSHED;
		op.pkts_out = 0;
		op.bytes_to_recv = 0;
		complete_send(&op);
	}
	while (qp->rq_count) {
		RecvWr &wr = qp->rq[qp->rq_head];
		if (!qp->quiet) {
			Cqe e{};
			e.wr_id = wr.wr_id;
			e.status = EFA_FLUSHED;
			e.opcode = IBV_WC_RECV;
			push_cqe(qp, qp->rcq, e);
		}
		qp->rq_head = (qp->rq_head + 1) % uint32_t(qp->rq.size());
		qp->rq_count--;
	}
}

} // namespace efasim
