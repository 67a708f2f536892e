/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Packet buffers, posting and the RNR queue: see packet_io.h. */
#include "rdm/packet_io.h"

#include "log.h"
#include "rdm/ep.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace efa::rdm {

/* ------------------------------------------------------------------ pools */

int PktPool::init(const verbs::Pd &pd, size_t count, size_t size, Pkt::Kind kind)
{
	const size_t stride = (size + 63) & ~size_t(63);
	if (!mem_.alloc(count * stride))
		return -FI_ENOMEM;
	auto mr = verbs::Mr::reg(pd, mem_.data(), count * stride, verbs::kLocalWrite);
	if (!mr.ok()) {
		mem_.reset();
		return mr.error();
	}
	mr_ = mr.take();
	pkts_.assign(count, Pkt{});
	free_ = nullptr;
	for (size_t i = count; i-- > 0;) {
		Pkt &p = pkts_[i];
		p.buf = mem_.data() + i * stride;
		p.cap = uint32_t(size);
		p.lkey = mr_.lkey();
		p.kind = kind;
		p.next_free = free_;
		free_ = &p;
	}
	avail_ = count;
	return 0;
}

void PktPool::reset()
{
	mr_ = verbs::Mr();
	pkts_.clear();
	mem_.reset();
	free_ = nullptr;
	avail_ = 0;
}

Pkt *PktPool::get()
{
	Pkt *p = free_;
	if (!p)
		return nullptr;
	free_ = p->next_free;
	avail_--;
	p->len = 0;
	p->data_len = 0;
	p->rnr_tries = 0;
	p->queued = false;
	p->probe = false;
	p->inject = false;
	p->peer = nullptr;
	p->op = nullptr;
	p->msg = nullptr;
	return p;
}

void PktPool::put(Pkt *p)
{
	p->next_free = free_;
	free_ = p;
	avail_++;
}

/* ------------------------------------------------------------------ PacketIo */

int PacketIo::init(const verbs::Pd &pd, verbs::Qp &qp, size_t ntx, size_t nrx, size_t size, size_t copy_max)
{
	qp_ = &qp;
	size_ = size;
	copy_max_ = copy_max;
	if (int r = tx_.init(pd, ntx, size, Pkt::Kind::Tx))
		return r;
	if (int r = rx_.init(pd, nrx, size, Pkt::Kind::Rx)) {
		tx_.reset();
		return r;
	}
	return 0;
}

void PacketIo::start()
{
	while (Pkt *p = rx_.get())
		repost(p);
}

void PacketIo::reset()
{
	tx_.reset();
	rx_.reset();
	qp_ = nullptr;
}

void PacketIo::repost(Pkt *pkt)
{
	const verbs::Sge sge{reinterpret_cast<uintptr_t>(pkt->buf), pkt->cap, pkt->lkey};
	if (int r = qp_->post_recv(reinterpret_cast<uint64_t>(pkt), {&sge, 1})) {
		EFA_WARN(EpData, "reposting a receive buffer failed: %s", fi_strerror(-r));
		rx_.put(pkt);
	}
}

/* A copy: a link among the endpoint's copies (PacketIo::copies_), its Pkt and `cap`
 * bytes of buffer, in one allocation. */
struct CopyLink {
	CopyLink *prev, *next;
};
static_assert(sizeof(CopyLink) % alignof(Pkt) == 0);

namespace {

CopyLink *link_of(Pkt *c) { return reinterpret_cast<CopyLink *>(c) - 1; }

Pkt *new_copy(size_t cap)
{
	void *mem = ::operator new(sizeof(CopyLink) + sizeof(Pkt) + cap);
	Pkt *c = new (static_cast<CopyLink *>(mem) + 1) Pkt();
	c->buf = reinterpret_cast<uint8_t *>(c + 1);
	c->cap = uint32_t(cap);
	c->kind = Pkt::Kind::Copy;
	return c;
}

void delete_copy(Pkt *c)
{
	c->~Pkt();
	::operator delete(link_of(c));
}

/* Spare full-size copies kept for reuse; the rest go back to the heap. */
constexpr size_t kSpareCopies = 32;

} // namespace

Pkt *PacketIo::copy_of(Pkt &pkt, bool bounded)
{
	if (pkt.kind == Pkt::Kind::Copy || pkt.held) {
		pkt.refs++;
		return &pkt;
	}
	if (bounded && copy_bytes_ + pkt.len > copy_max_) {
		pkt.held = true;
		pkt.refs = 1;
		held_++;
		return &pkt;
	}
	Pkt *c;
	if (pkt.len > size_ / 2 && !spare_.empty()) {
		c = spare_.back();
		spare_.pop_back();
	} else {
		c = new_copy(pkt.len > size_ / 2 ? size_ : pkt.len);
	}
	/* Among the live copies, so that the endpoint frees those still held at its end
	 * (an unexpected message nobody received). */
	CopyLink *l = link_of(c);
	l->prev = nullptr;
	l->next = copies_;
	if (copies_)
		copies_->prev = l;
	copies_ = l;
	std::memcpy(c->buf, pkt.buf, pkt.len);
	c->len = pkt.len;
	c->peer = pkt.peer;
	c->refs = 1;
	copy_bytes_ += c->cap;
	return c;
}

void PacketIo::free_copy(Pkt *c)
{
	if (--c->refs)
		return;
	if (c->held) {
		c->held = false;
		held_--;
		if (qp_ && qp_->get()) /* not once the endpoint's QP is gone (fi_close) */
			repost(c);
		return;
	}
	copy_bytes_ -= c->cap;
	CopyLink *l = link_of(c);
	(l->prev ? l->prev->next : copies_) = l->next;
	if (l->next)
		l->next->prev = l->prev;
	if (c->cap == size_ && spare_.size() < kSpareCopies)
		spare_.push_back(c);
	else
		delete_copy(c);
}

PacketIo::~PacketIo()
{
	for (Pkt *c : spare_)
		delete_copy(c);
	while (copies_) {
		CopyLink *next = copies_->next;
		delete_copy(reinterpret_cast<Pkt *>(copies_ + 1));
		copies_ = next;
	}
}

void PacketIo::posted(Peer &p) { p.posted++; }

/* The statistics of a packet the device took (Sign 1), or, when the doorbell of its
 * burst was refused, did not take after all (-1). */
template <int Sign>
inline void PacketIo::count_sent(Pkt *pkt, uint32_t bytes)
{
	Peer &p = *pkt->peer;
	p.posted += Sign;
	const uint8_t type = pkt->len ? pkt->buf[0] : 0;
	stats.tx_pkts[type] += Sign;
	stats.tx_bytes[type] += Sign * int64_t(bytes);
	p.tx_pkts += Sign;
	p.tx_bytes += Sign * int64_t(bytes);
	if (pkt->rnr_tries) {
		stats.rnr_resent += Sign;
		p.rnr_resent += Sign;
	}
}

int PacketIo::send(Pkt *pkt)
{
	if (pkt->data_len) [[unlikely]]
		return post_sges(pkt, 0);
	Peer &p = *pkt->peer;
	const verbs::Sge sge{reinterpret_cast<uintptr_t>(pkt->buf), pkt->len, pkt->lkey};
	const int r = qp_->send(reinterpret_cast<uint64_t>(pkt), p.dest, {&sge, 1}, 0, 0);
	if (!r)
		count_sent<1>(pkt, pkt->len);
	return r;
}

/* A send of pkt with its payload in place (Pkt::data) when it has one, `flags` for the
 * verbs layer (kMore: the doorbell waits). */
int PacketIo::post_sges(Pkt *pkt, uint32_t flags)
{
	verbs::Sge sge[2];
	sge[0] = {reinterpret_cast<uintptr_t>(pkt->buf), pkt->len, pkt->lkey};
	size_t n = 1;
	if (pkt->data_len)
		sge[n++] = {reinterpret_cast<uintptr_t>(pkt->data), pkt->data_len, pkt->data_lkey};
	const int r = qp_->send(reinterpret_cast<uint64_t>(pkt), pkt->peer->dest, {sge, n}, 0, flags);
	if (!r)
		count_sent<1>(pkt, pkt->len + pkt->data_len);
	return r;
}

void PacketIo::send_more(Pkt *pkt)
{
	/* Builds the work request only: errors come at the doorbell. */
	(void)post_sges(pkt, verbs::kMore);
	burst_.push_back(pkt);
}

int PacketIo::ring(std::vector<Pkt *> &refused)
{
	const int r = qp_->flush();
	if (r) {
		for (Pkt *pkt : burst_)
			count_sent<-1>(pkt, pkt->len + pkt->data_len);
		refused.swap(burst_);
	}
	burst_.clear();
	return r;
}

void PacketIo::queue(Pkt *pkt)
{
	Peer &p = *pkt->peer;
	pkt->queued = true;
	p.queued.push_back(pkt);
	mark_busy(p);
}

void PacketIo::mark_busy(Peer &p)
{
	if (!p.on_list())
		busy_.push_back(&p);
}

void PacketIo::unbusy(Peer &p)
{
	if (p.on_list())
		busy_.unlink(&p);
}

void PacketIo::on_rnr(Pkt *pkt, uint64_t now)
{
	Peer &p = *pkt->peer;
	stats.rnr_received++;
	p.rnr_received++;
	pkt->rnr_tries++;
	/* The first RNR of a packet is resent at once; repeated ones back the peer off
	 * for a random, doubling time (protocol.md section 7). */
	if (pkt->rnr_tries > 1) {
		if (!p.backoff_us)
			p.backoff_us = backoff_first_us_ ? backoff_first_us_ : 40 + uint32_t(random() % 81);
		else
			p.backoff_us = std::min(p.backoff_us * 2, backoff_max_us_);
		p.backoff_until = now + uint64_t(p.backoff_us) * 1000;
	}
	queue(pkt);
}

void PacketIo::resend(uint64_t now, bool (*owes)(void *ctx, Peer &p), void *ctx)
{
	for (Peer *p = busy_.front(); p;) {
		Peer *next = IList<Peer>::next(p);
		const bool owing = owes(ctx, *p);
		if (now >= p->backoff_until) {
			p->backoff_until = 0; /* over: held_back reads no clock (ep.h) */
			while (Pkt *pkt = p->queued.front()) {
				if (send(pkt))
					break; /* the send queue is full: later */
				p->queued.unlink(pkt);
				pkt->queued = false;
			}
		}
		if (p->queued.empty() && !owing)
			busy_.unlink(p);
		p = next;
	}
}

} // namespace efa::rdm
