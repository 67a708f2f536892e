/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Packet arrival: every received packet is checked (pkt.h's parse), its sender found
 * (peer.cpp, peer_table.h), ordered requests pass the peer's reorder buffer (protocol.md section 7),
 * and the packet goes to its handler. The device receive buffer is reposted at once;
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
	if (pkt->len >= 2 && pkt->buf[1] != kProtoVersion) {
		/* Our protocol probe (shaped as v4's HANDSHAKE), or another protocol's packet. */
		RawAddr from;
		if (parse_probe(pkt->buf, pkt->len, from))
			handle_probe(from, wc);
		else
			foreign_packet(*pkt, wc);
		io.repost(pkt);
		return;
	}
	Parsed pk;
	const ParseError e = parse(pkt->buf, pkt->len, pk);
	if (e != ParseError::None) {
		drops.malformed++;
		if (!warned_malformed) {
			warned_malformed = true;
			EFA_WARN(EpData, "malformed packet from QP %u (%u bytes): %s; dropped (peers must run the same "
				 "protocol version; further ones are counted, not logged)",
				 wc.src_qp, wc.byte_len, parse_error_str(e));
		}
		io.repost(pkt);
		return;
	}
	Peer *p = peer_from_wc(wc, pk);
	if (p) {
		peer_heard(*p);
		p->speaks_ours = true; /* it spoke our protocol (also makes implicit peers known) */
		pkt->peer = p;
		if (!p->hs_sent)
			send_handshake(*p);
		dispatch(*p, pkt, pk);
	}
	io.repost(pkt);
}

void Ep::dispatch(Peer &p, Pkt *pkt, const Parsed &pk)
{
	switch (pk.type) {
	case PktType::Handshake: handle_handshake(p, pk); break;
	case PktType::Cts: tx.handle_cts(p, pk); break;
	case PktType::Data: rx.handle_data(p, pk); break;
	case PktType::Receipt: tx.handle_receipt(p, pk); break;
	case PktType::ReadRsp: tx.handle_read_rsp(p, pk); break;
	case PktType::AtomRsp: tx.handle_atom_rsp(p, pk); break;
	case PktType::Error: tx.handle_error(p, pk); break;
	case PktType::WriteData: handle_write_data(p, pk); break;
	case PktType::WriteReq: handle_write_req(p, pk); break;
	case PktType::ReadReq: handle_read_req(p, pk); break;
	case PktType::EagerMsg:
	case PktType::EagerTag:
	case PktType::MediumMsg:
	case PktType::MediumTag:
	case PktType::LongCtsMsg:
	case PktType::LongCtsTag:
	case PktType::LongReadMsg:
	case PktType::LongReadTag:
	case PktType::AtomicReq: ordered_req(p, pkt, pk); break;
	case PktType::Eor: tx.handle_eor(p, pk); break;
	default:
		/* Types this version parses but does not act on yet. */
		drops.unknown++;
		EFA_DBG(EpData, "%s from %s: not handled", pkt_type_name(pk.type), addr_to_string(p.raw).c_str());
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
				 "reorder reach of %u (protocol.md section 7): dropped; the peer does not follow the "
				 "protocol (further ones are counted, not logged)",
				 addr_to_string(p.raw).c_str(), id - p.rob.expected(), p.rob.reach());
		}
		return;
	case ReorderBuffer<Pkt>::Verdict::Deliver:
		p.rob.accept(id, pkt);
		break;
	}
	process_req(p, pkt, pk);
	/* What waited for this one, in order. */
	while (Pkt *chain = p.rob.pop()) {
		bool started = false;
		while (chain) {
			Pkt *next = chain->rb_next;
			Parsed c;
			if (parse(chain->buf, chain->len, c) == ParseError::None) {
				/* Only medium messages have several packets per id: another start
				 * of a one-packet request is a duplicate from a faulty peer. */
				const bool medium = c.type == PktType::MediumMsg || c.type == PktType::MediumTag;
				if (started && !medium)
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
	if (pk.type != PktType::MediumMsg && pk.type != PktType::MediumTag)
		return true;
	const uint64_t off = pk.as<MediumHdr>().seg_off;
	for (const Pkt *c = chain; c; c = c->rb_next) {
		Parsed q;
		if (parse(c->buf, c->len, q) != ParseError::None || q.type != pk.type ||
		    q.as<MediumHdr>().seg_off == off)
			return true;
	}
	return false;
}

void Ep::process_req(Peer &p, Pkt *pkt, const Parsed &pk)
{
	/* Later segments of a medium message whose first one started it. */
	if (pk.type == PktType::MediumMsg || pk.type == PktType::MediumTag) {
		if (MsgLink *l = Receiver::active_msg(p, pk.as<RtmHdr>().msg_id)) {
			rx.add_segment(*l->m, *pkt, pk);
			return;
		}
	}
	if (pk.type == PktType::AtomicReq)
		handle_atomic_req(p, pk);
	else
		rx.start_msg(p, *pkt, pk);
}

} // namespace efa::rdm
