/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Packet arrival: every received packet is checked (v4::parse), its sender found
 * (peer.cpp, peer_table.h), ordered requests pass the peer's reorder buffer (protocol.md,
 * "Ordering"), and the packet goes to its handler. The device receive buffer is reposted at once;
 * what must outlive it is copied.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"

#include <cstring>

namespace efa::rdm {

void Ep::rx_done(Pkt *pkt, const verbs::Wc &wc)
{
	if (wc.remote_write_imm()) {
		/* A device write with immediate data; without unsolicited write receive it
		 * took one of our buffers. */
		remote_write_imm(wc);
		if (!wc.unsolicited)
			io.repost(pkt);
		return;
	}
	if (!wc.ok()) {
		if (wc.vendor_err != uint32_t(EfaStatus::FLUSHED))
			EFA_WARN(EpData, "receive completion failed: %s", efa_status_msg(wc.vendor_err));
		io.repost(pkt);
		return;
	}
	pkt->len = wc.byte_len;
	if (rx_eager(pkt, wc)) {
		io.repost(pkt);
		return;
	}
	if (pkt->len >= 2 && pkt->buf[1] != v4::kVersion) {
		foreign_packet(*pkt, wc);
		io.repost(pkt);
		return;
	}
	Parsed pk;
	const v4::Error e = v4::parse(pkt->buf, pkt->len, pk);
	if (e != v4::Error::None) {
		drops.malformed++;
		if (!warned_malformed) {
			warned_malformed = true;
			EFA_WARN(EpData, "malformed packet from QP %u (%u bytes): %s; dropped (the peer does not follow "
				 "protocol v4; further ones are counted, not logged)",
				 wc.src_qp, wc.byte_len, v4::error_str(e));
		}
		io.repost(pkt);
		return;
	}
	Peer *p = peer_from_wc(wc, pk);
	if (p) {
		arrived(*p, *pkt);
		/* Our HANDSHAKE: to a peer we have not sent one, and again to one whose REQ
		 * still carries its address (it has not received ours: the first may have
		 * reached it before it knew us), unless one is on its way. */
		if (!p->hs_sent || (pk.has_raw_addr && !p->hs_inflight && !p->hs_owed))
			send_handshake(*p);
		dispatch(*p, pkt, pk);
	}
	if (!pkt->held) /* kept in place of a copy: reposted when released (packet_io.h) */
		io.repost(pkt);
}

/*
 * The common small message, whole: an EAGER REQ (v4::parse_eager) from a known peer that
 * we have sent our HANDSHAKE, the next message id it owes us with nothing queued behind
 * it, and a posted receive that takes it whole (Receiver::take_eager). Everything the
 * general path below would do with it - counters, the peer's liveness, the reorder
 * buffer's turn, the placement and the completion - and nothing more; any other packet
 * (another type or flag, a peer not met, dead or owed a HANDSHAKE, out of order, no
 * receive) returns false untouched and takes the general path. protocol.md section 6
 * (Ordering); design.md, the entry of arrival.cpp.
 */
bool Ep::rx_eager(Pkt *pkt, const verbs::Wc &wc)
{
	v4::Eager e;
	if (!v4::parse_eager(pkt->buf, pkt->len, e) || !wc.src_known())
		return false;
	Peer *p = peers.for_src(wc.slid, wc.src_qp);
	if (!p || p->raw.qkey != e.connid || p->addr == FI_ADDR_NOTAVAIL || p->dead || !p->hs_sent ||
	    e.msg_id != p->rob.expected() || p->rob.queued())
		return false;
	if (!rx.take_eager(rx_port, *p, e))
		return false;
	arrived(*p, *pkt);
	p->rob.deliver_expected();
	return true;
}

void Ep::refuse_req(Peer &p, const Parsed &pk, const char *why)
{
	drops.unknown++;
	EFA_WARN(EpData, "a %s from %s is dropped: %s", v4::type_name(pk.type), addr_to_string(p.raw).c_str(), why);
}

/* Why a REQ cannot be taken (null: it can): what it names must cover what it carries. */
const char *Ep::req_fault(const Parsed &pk)
{
	if (pk.read_iov_count > kMaxRmaIov)
		return "it names more read iovs than this provider takes (4); the sender should send fewer iovs per "
		       "message";
	if (pk.type == Type::LongReadMsgRtm || pk.type == Type::LongReadTagRtm || pk.type == Type::LongReadRtw) {
		uint64_t covered = 0;
		for (uint32_t i = 0; i < pk.read_iov_count; i++)
			covered += pk.read(i).len;
		const uint64_t len = pk.type == Type::LongReadRtw ? pk.as<v4::LongReadRtw>().msg_length
								  : pk.as<v4::LongReadRtm>().msg_length;
		if (covered < len)
			return "its read iovs cover less than its message";
	}
	if (pk.type == Type::RuntCtsMsgRtm || pk.type == Type::RuntCtsTagRtm)
		return "this provider does not implement the runting long-CTS protocol (no v4 node sends it)";
	if (is_runtread_rtm(pk.type)) {
		const v4::RuntRtm h = pk.as<v4::RuntRtm>();
		uint64_t covered = 0;
		for (uint32_t i = 0; i < pk.read_iov_count; i++)
			covered += pk.read(i).len;
		if (covered < h.msg_length || h.seg_offset + pk.payload_len > h.runt_length)
			return "its read iovs cover less than its message, or a runt segment lies beyond the runt";
	}
	return nullptr;
}

void Ep::dispatch(Peer &p, Pkt *pkt, const Parsed &pk)
{
	/* An unordered REQ that cannot be taken is dropped here; an ordered one at its turn
	 * (process_req), so that its message id is consumed and the peer's later messages
	 * are not held back. */
	if (!is_ordered(pk)) {
		if (const char *why = pk.info.req ? req_fault(pk) : nullptr) {
			refuse_req(p, pk, why);
			return;
		}
	}
	switch (pk.type) {
	case Type::Handshake: handle_handshake(p, pk); break;
	case Type::Cts: tx.handle_cts(p, pk); break;
	case Type::CtsData:
		if (Sender::owns_id(pk.as<v4::CtsData>().recv_id))
			tx.handle_read_data(p, pk);
		else
			rx.handle_data(p, pk);
		break;
	case Type::ReadRsp: tx.handle_read_rsp(p, pk); break;
	case Type::Eor: tx.handle_eor(p, pk); break;
	case Type::ReadNack: tx.handle_read_nack(p, pk); break;
	case Type::Receipt: tx.handle_receipt(p, pk); break;
	case Type::AtomRsp: tx.handle_atom_rsp(p, pk); break;
	case Type::ExtError: tx.handle_error(p, pk); break;
	case Type::ExtWriteData: handle_write_data(p, pk); break;
	case Type::EagerRtw:
	case Type::DcEagerRtw:
	case Type::LongCtsRtw:
	case Type::DcLongCtsRtw:
	case Type::LongReadRtw: handle_write_req(p, pk); break;
	case Type::ShortRtr:
	case Type::LongCtsRtr: handle_read_req(p, pk); break;
	case Type::RuntCtsRtw:
	case Type::RuntReadRtw:
		refuse_req(p, pk, "this provider does not take runting writes (emulated writes are long-CTS or "
				  "long-read here; no v4 node sends them for host memory)");
		break;
	default:
		if (is_ordered(pk))
			ordered_req(p, pkt, pk);
		else
			refuse_req(p, pk, "a type this provider does not take");
		break;
	}
}

void Ep::ordered_req(Peer &p, Pkt *pkt, const Parsed &pk)
{
	const uint32_t id = msg_id_of(pk);
	switch (p.rob.classify(id)) {
	case ReorderBuffer<Pkt>::Verdict::Past:
		rx.route_segment(p, *pkt, pk);
		return;
	case ReorderBuffer<Pkt>::Verdict::Queued:
		/* A duplicate waits for nothing: dropped now rather than copied and queued. */
		if (queued_dup(p.rob.find(id), pk)) {
			drops.dup++;
			return;
		}
		p.rob.accept(id, io.copy_of(*pkt));
		return;
	case ReorderBuffer<Pkt>::Verdict::Refused:
		drops.far++;
		if (!warned_far) {
			warned_far = true;
			EFA_WARN(EpData, "a request from %s is %u message ids ahead of the next one expected, beyond the "
				 "reorder reach of %u (protocol.md section 6): dropped; the peer does not follow the "
				 "protocol (further ones are counted, not logged)",
				 addr_to_string(p.raw).c_str(), id - p.rob.expected(), p.rob.reach());
		}
		return;
	case ReorderBuffer<Pkt>::Verdict::Deliver:
		p.rob.deliver_expected();
		break;
	}
	process_req(p, pkt, pk);
	/* What waited for this one, in order. */
	while (Pkt *chain = p.rob.pop()) {
		bool started = false;
		while (chain) {
			Pkt *next = chain->rb_next;
			Parsed c;
			if (v4::parse(chain->buf, chain->len, c) == v4::Error::None) {
				/* Only medium messages have several packets per id: another start
				 * of a one-packet request is a duplicate from a faulty peer. */
				if (started && !is_segmented(c.type))
					drops.dup++;
				else
					process_req(p, chain, c);
				started = true;
			}
			io.free_copy(chain);
			chain = next;
		}
	}
}

bool Ep::queued_dup(const Pkt *chain, const Parsed &pk)
{
	if (!chain)
		return false;
	/* Only MEDIUM has several packets per id; they differ by offset. */
	if (!is_segmented(pk.type))
		return true;
	const uint64_t off = data_offset(pk);
	for (const Pkt *c = chain; c; c = c->rb_next) {
		Parsed q;
		if (v4::parse(c->buf, c->len, q) != v4::Error::None || q.type != pk.type || data_offset(q) == off)
			return true;
	}
	return false;
}

void Ep::process_req(Peer &p, Pkt *pkt, const Parsed &pk)
{
	if (const char *why = req_fault(pk)) {
		refuse_req(p, pk, why); /* its message id is consumed: the next ones flow */
		return;
	}
	/* Later segments of a medium or runting message whose first one started it. */
	if (is_segmented(pk.type)) {
		if (MsgLink *l = Receiver::active_msg(p, msg_id_of(pk))) {
			rx.add_segment(*l->m, *pkt, pk);
			return;
		}
	}
	if (pk.info.family == v4::Family::Rta)
		handle_atomic_req(p, pk);
	else if (pk.type == Type::ExtVoid)
		rx.skip_ids(p, pk);
	else
		rx.start_msg(p, *pkt, pk);
}

} // namespace efa::rdm
