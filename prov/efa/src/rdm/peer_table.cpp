/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The RDM endpoint's peers: see peer_table.h. */
#include "rdm/peer_table.h"

#include "log.h"
#include "rdm/ep.h"

namespace efa::rdm {

PeerTable::PeerTable() = default;
PeerTable::~PeerTable() { clear(); }

void PeerTable::init(Domain *dom, Av *av, uint32_t rx_window, PacketIo *io)
{
	io_ = io;
	dom_ = dom;
	av_ = av;
	rx_window_ = rx_window;
}

void PeerTable::listen()
{
	if (listening_ || !av_)
		return;
	av_->listen(&notice_);
	listening_ = true;
}

void PeerTable::unlisten()
{
	if (!listening_)
		return;
	av_->unlisten(&notice_);
	listening_ = false;
}

std::unique_ptr<Peer> PeerTable::make(Domain::AhRef *ah, const RawAddr &raw, fi_addr_t addr)
{
	auto p = std::make_unique<Peer>(rx_window_);
	p->addr = addr;
	p->raw = raw;
	p->ah = ah;
	p->dest = verbs::Dest{ah->ah.get(), raw.qpn, raw.qkey};
	return p;
}

Peer *PeerTable::place(fi_addr_t addr, std::unique_ptr<Peer> p)
{
	if (addr >= by_addr_.size())
		by_addr_.resize(addr + 1);
	Peer *raw = p.get();
	raw->addr = addr;
	by_addr_[addr] = std::move(p);
	return raw;
}

Peer *PeerTable::for_addr(fi_addr_t addr, Found &how)
{
	const AvEntry *e = av_->lookup(addr); /* null once removed */
	if (!e)
		return nullptr;
	how = Found::Known;
	if (Peer *p = find(addr))
		return p;
	/* A sender first met through its own address (an implicit peer) keeps its state:
	 * message ids, reorder buffer, handshake. */
	if (Peer *ip = for_src(e->ah->ah.ahn(), e->addr.qpn);
	    ip && ip->addr == FI_ADDR_NOTAVAIL && ip->raw.qkey == e->addr.qkey) {
		for (size_t i = 0; i < implicit_.size(); i++)
			if (implicit_[i].get() == ip) {
				how = Found::Adopted;
				return adopt(i, addr);
			}
	}
	int err = 0;
	Domain::AhRef *ah = dom_->get_ah(e->addr.gid, &err);
	if (!ah) {
		EFA_WARN(EpData, "no address handle for %s: %s", addr_to_string(e->addr).c_str(), fi_strerror(-err));
		return nullptr;
	}
	how = Found::Created;
	Peer *p = place(addr, make(ah, e->addr, addr));
	link_src(p);
	return p;
}

Peer *PeerTable::add_implicit(Domain::AhRef *ah, const RawAddr &raw)
{
	implicit_.push_back(make(ah, raw, FI_ADDR_NOTAVAIL));
	Peer *p = implicit_.back().get();
	link_src(p);
	return p;
}

Peer *PeerTable::adopt(size_t i, fi_addr_t addr)
{
	std::unique_ptr<Peer> up = std::move(implicit_[i]);
	implicit_.erase(implicit_.begin() + ptrdiff_t(i));
	Peer *p = place(addr, std::move(up));
	EFA_DBG(EpData, "%s is now fi_addr %lu", addr_to_string(p->raw).c_str(), (unsigned long)addr);
	return p;
}

Peer *PeerTable::adopt_if_inserted(size_t i)
{
	Peer *p = implicit_[i].get();
	const fi_addr_t a = av_->reverse_lookup(p->ah->ah.ahn(), p->raw.qpn);
	const AvEntry *e = a == FI_ADDR_NOTAVAIL ? nullptr : av_->lookup(a);
	if (!e || e->addr.qkey != p->raw.qkey || (a < by_addr_.size() && by_addr_[a]))
		return nullptr;
	return adopt(i, a);
}

void PeerTable::link_src(Peer *p)
{
	by_src_[key(p->ah->ah.ahn(), p->raw.qpn)] = p;
	last_src_key_ = ~uint64_t(0);
}

void PeerTable::unlink_src(const Peer &p)
{
	last_src_key_ = ~uint64_t(0);
	auto it = by_src_.find(key(p.ah->ah.ahn(), p.raw.qpn));
	if (it != by_src_.end() && it->second == &p)
		by_src_.erase(it);
}

void PeerTable::free_peer(std::unique_ptr<Peer> p)
{
	if (!p)
		return;
	p->rob.clear([this](Pkt *c) { io_->free_copy(c); });
	if (p->ah)
		dom_->put_ah(p->ah);
}

void PeerTable::free_retired(Peer *p)
{
	for (auto it = retired_.begin(); it != retired_.end(); ++it)
		if (it->get() == p) {
			std::unique_ptr<Peer> up = std::move(*it);
			retired_.erase(it);
			free_peer(std::move(up));
			return;
		}
}

void PeerTable::clear()
{
	for (auto *v : {&by_addr_, &implicit_, &retired_}) {
		for (auto &p : *v)
			free_peer(std::move(p));
		v->clear();
	}
	by_src_.clear();
	last_src_key_ = ~uint64_t(0);
}

} // namespace efa::rdm
