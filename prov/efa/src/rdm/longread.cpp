/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The read-based long message protocol (docs/protocol.md section 8): the sender's REQ
 * names its buffer (registered for remote read), the receiver, once the message is
 * matched, RDMA-reads it straight into the receive buffer and answers EOR; the sender
 * completes on EOR. Used for messages of FI_EFA_INTER_MIN_READ_MESSAGE_SIZE and more
 * when both devices have RDMA read and the peer's handshake is known.
 *
 * Buffers the application registered with FI_REMOTE_READ are used as they are; others
 * are registered for the operation and released when it completes.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"

#include <algorithm>

namespace efa::rdm {

bool Sender::longread_ok(const Peer &p, uint64_t len, size_t iov_count) const
{
	return cfg_.use_device_rdma && len && len >= cfg_.min_read && p.hs_got && (cfg_.features & kFeatRdmaRead) &&
	       (p.features & kFeatRdmaRead) && iov_count <= kMaxRmaIov;
}

int Sender::longread_send(TxOp &op, uint16_t flags)
{
	Peer &p = *op.peer;
	RmaIov riov[kMaxRmaIov];
	uint32_t n = 0;
	for (size_t i = 0; i < op.iov_count; i++) {
		void *base = op.iov[i].iov_base;
		const size_t len = op.iov[i].iov_len;
		if (!len)
			continue;
		uint64_t key = 0;
		if (int r = port_.tx_read_key(base, len, op.desc[i], op.reg[i], key))
			return r;
		riov[n++] = RmaIov{reinterpret_cast<uintptr_t>(base), len, key};
	}
	op.proto = Proto::LongRead;
	op.id = ids_.add(&op);
	op.need_receipt = true; /* the EOR */
	op.sent = op.len;
	Pkt *pkt = tx_pkt(p, &op);
	PktWriter w(pkt->buf, pkt->cap);
	LongReadHdr *h = w.rtm<LongReadHdr>(PktType::LongReadMsg, op.kind == TxKind::Tagged, cfg_.qkey,
					    uint16_t(flags & ~kFlagDeliveryComplete), op.msg_id, 0, op.tag);
	h->msg_len = op.len;
	h->send_id = op.id;
	h->iov_count = n;
	raw_addr(w, p);
	if (flags & kFlagCqData)
		w.cq_data(op.data);
	w.bytes(riov, n * sizeof(RmaIov));
	pkt->len = uint32_t(w.size());
	port_.tx_post(pkt);
	return 0;
}

namespace {

/* Bytes the receiver reads: what fits its buffer (none when discarded). */
uint64_t read_len(const MsgRx &m) { return m.discard ? 0 : std::min(m.msg_len, m.cap); }

} // namespace

void Receiver::read_start(MsgRx &m)
{
	const uint64_t want = read_len(m);
	uint64_t left = want;
	for (size_t i = 0; i < m.dst_count && left; i++) {
		const size_t len = std::min<uint64_t>(m.dst[i].iov_len, left);
		left -= len;
		if (!len)
			continue;
		if (int r = port_.rx_reg(m.dst[i].iov_base, len, m.reg[i])) {
			EFA_WARN(EpData, "registering a receive buffer for a read-based message failed: %s",
				 fi_strerror(-r));
			m.err = FI_EIO;
			m.prov_errno = uint32_t(EfaStatus::REGISTRATION_FAILED);
			break;
		}
	}
	if (m.err || !want) {
		m.received = m.msg_len;
		if (send_eor(m))
			finish(&m);
		return;
	}
	read_pump(m);
}

void Receiver::read_pump(MsgRx &m)
{
	const uint64_t want = read_len(m);
	const uint64_t seg = cfg_.max_read;
	m.owes_reads = false;
	while (m.rd_posted < want) {
		/* The next piece: within one remote iov, one local iov and one work request. */
		uint64_t roff = m.rd_posted, loff = m.rd_posted;
		uint32_t ri = 0;
		size_t li = 0;
		while (ri < m.rd_count && roff >= m.rd[ri].len)
			roff -= m.rd[ri++].len;
		while (li < m.dst_count && loff >= m.dst[li].iov_len)
			loff -= m.dst[li++].iov_len;
		if (ri == m.rd_count || li == m.dst_count)
			break;
		const uint64_t n = std::min({m.rd[ri].len - roff, m.dst[li].iov_len - loff, seg, want - m.rd_posted});
		Pkt *pkt = port_.rx_tx_pkt(*m.peer);
		if (!pkt) {
			m.owes_reads = true;
			owe(m);
			return;
		}
		pkt->msg = &m;
		pkt->len = uint32_t(n); /* the bytes this read brings, for accounting */
		uint8_t *dst = static_cast<uint8_t *>(m.dst[li].iov_base) + loff;
		if (int r = port_.rx_read(pkt, dst, uint32_t(n), m.reg[li], m.rd[ri].addr + roff, uint32_t(m.rd[ri].key))) {
			EFA_WARN(EpData, "posting an RDMA read failed: %s", fi_strerror(-r));
			port_.rx_put_tx(pkt);
			m.err = FI_EIO;
			m.prov_errno = uint32_t(EfaStatus::POST_FAILED);
			break;
		}
		m.rd_posted += n;
	}
	if (m.err && m.rd_done == m.rd_posted) {
		m.received = m.msg_len;
		if (send_eor(m))
			finish(&m);
	}
}

void Receiver::read_done(Pkt *pkt, bool ok, uint32_t status)
{
	MsgRx &m = *pkt->msg;
	m.rd_done += pkt->len;
	pkt->msg = nullptr;
	port_.rx_put_tx(pkt);
	if (!ok && !m.err) {
		EFA_WARN(EpData, "RDMA read of a message from %s failed: %s", addr_to_string(m.peer->raw).c_str(),
			 efa_status_msg(status));
		m.err = efa_status_to_fi(status);
		m.prov_errno = status;
	}
	if (m.rd_done < m.rd_posted || (m.rd_posted < read_len(m) && !m.err))
		return;
	m.received = m.msg_len;
	if (send_eor(m))
		finish(&m);
}

} // namespace efa::rdm
