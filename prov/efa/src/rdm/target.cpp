/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The target of emulated RMA and atomics (docs/protocol.md section 9): every remote
 * iov is checked against this domain's registered memory (key, bounds, access) before
 * a byte is touched; a violation is answered with ERROR and logged, never written.
 * Also the target side of device writes with immediate data. Its answers (ERROR,
 * ATOMRSP, RECEIPT, WRITE_DATA) are built in pkt_ctl.cpp.
 */
#include "rdm/ep.h"

#include "info.h"
#include "log.h"
#include "rdm/atomic_ops.h"

#include <cstring>

namespace efa::rdm {

int Ep::check_rma(const RmaIov *iov, uint32_t n, uint64_t access, iovec *out)
{
	std::lock_guard<std::mutex> g(dom->lock);
	for (uint32_t i = 0; i < n; i++) {
		auto it = dom->mr_keys.find(iov[i].key);
		const Mr *mr = it == dom->mr_keys.end() ? nullptr : it->second;
		const uint64_t a = iov[i].addr, len = iov[i].len;
		if (!mr || (mr->access & access) != access || a < mr->addr || len > mr->len || a - mr->addr > mr->len - len) {
			EFA_WARN(EpData, "remote access refused: key %#lx, [%#lx, +%lu) %s (needs %s)",
				 (unsigned long)iov[i].key, (unsigned long)a, (unsigned long)len,
				 !mr ? "is no memory region of this domain" : "lies outside the region or lacks its access",
				 access & FI_REMOTE_WRITE ? "FI_REMOTE_WRITE" : "FI_REMOTE_READ");
			return FI_EACCES;
		}
		out[i] = iovec{reinterpret_cast<void *>(uintptr_t(a)), size_t(len)};
	}
	return 0;
}

void Ep::handle_write_req(Peer &p, const Parsed &pk)
{
	const WriteReqHdr &h = pk.as<WriteReqHdr>();
	iovec dst[kMaxRmaIov];
	if (int err = check_rma(pk.iov, pk.iov_count, FI_REMOTE_WRITE, dst)) {
		send_ctl(Ctl{&p, PktType::Error, h.send_id, 0, uint32_t(err), {}});
		return;
	}
	rx.start_write(p, pk, dst, pk.iov_count);
}

void Ep::handle_read_req(Peer &p, const Parsed &pk)
{
	const ReadReqHdr &h = pk.as<ReadReqHdr>();
	iovec src[kMaxRmaIov];
	int err = check_rma(pk.iov, pk.iov_count, FI_REMOTE_READ, src);
	if (err || !tx.respond_read(p, h.recv_id, h.msg_len, src, pk.iov_count))
		send_ctl(Ctl{&p, PktType::Error, h.recv_id, 0, uint32_t(err ? err : FI_EAGAIN), {}});
}

void Ep::handle_atomic_req(Peer &p, const Parsed &pk)
{
	const AtomicReqHdr &h = pk.as<AtomicReqHdr>();
	const AtomicKind kind = AtomicKind(h.kind);
	const fi_op op = fi_op(h.op);
	const fi_datatype dt = fi_datatype(h.datatype);
	auto refuse = [&](int err) { send_ctl(Ctl{&p, PktType::Error, h.recv_id, h.msg_id, uint32_t(err), {}}); };
	if (!atomic_valid(kind, op, dt)) {
		refuse(FI_EOPNOTSUPP);
		return;
	}
	const size_t dts = atomic_datatype_size(dt);
	const uint64_t bytes = h.count * dts;
	const uint64_t operands = (op == FI_ATOMIC_READ ? 0 : bytes) * (kind == AtomicKind::Compare ? 2 : 1);
	if (h.count > mtu || pk.iov_count != 1 || pk.iov[0].len != bytes || pk.payload_len != operands) {
		drops.malformed++;
		refuse(FI_EINVAL);
		return;
	}
	/* Writes need FI_REMOTE_WRITE, fetches and compares also FI_REMOTE_READ, and a fetch
	 * of FI_ATOMIC_READ only FI_REMOTE_READ. */
	uint64_t access = kind == AtomicKind::Write ? FI_REMOTE_WRITE : FI_REMOTE_READ | FI_REMOTE_WRITE;
	if (op == FI_ATOMIC_READ)
		access = FI_REMOTE_READ;
	iovec target;
	if (int err = check_rma(pk.iov, 1, access, &target)) {
		refuse(err);
		return;
	}
	const uint8_t *operand = op == FI_ATOMIC_READ ? nullptr : pk.payload;
	const uint8_t *compare = kind == AtomicKind::Compare ? pk.payload + bytes : nullptr;
	std::vector<uint8_t> result(kind == AtomicKind::Write ? 0 : bytes);
	atomic_apply(kind, op, dt, target.iov_base, operand, compare, result.empty() ? nullptr : result.data(),
		     size_t(h.count));
	if (access & FI_REMOTE_WRITE)
		count(kCntrRemoteWrite, true);
	if (access & FI_REMOTE_READ)
		count(kCntrRemoteRead, true);
	if (kind == AtomicKind::Write)
		send_ctl(Ctl{&p, PktType::Receipt, h.recv_id, h.msg_id, 0, {}});
	else
		send_ctl(Ctl{&p, PktType::AtomRsp, h.recv_id, h.msg_id, 0, std::move(result)});
}

void Ep::remote_write_imm(const verbs::Wc &wc)
{
	/* A device write with immediate data: the remote CQ data completion. */
	count(kCntrRemoteWrite, wc.ok());
	if (!wc.ok() || !rx_cq)
		return;
	fi_cq_tagged_entry e{};
	e.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
	e.data = wc.imm;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	if (wc.slid != 0xffff)
		src = av->reverse_lookup(wc.slid, wc.src_qp);
	rx_cq->push(e, src);
}

} // namespace efa::rdm
