/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The target of RMA and atomics (docs/protocol.md section 8): every remote iov of an
 * emulated request (pkt_rma.cpp, pkt_atomic.cpp) is checked here against this domain's
 * registered memory (key, bounds, access) before a byte is touched; a violation is
 * logged, answered with EXT_ERROR to a peer of ours, and never written. Also the target side of device writes
 * with immediate data. Its answers (EXT_ERROR, ATOMRSP, RECEIPT) are built in
 * pkt_ctl.cpp.
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

int Ep::check_rma(const Parsed &pk, uint64_t access, iovec *out, uint64_t &total)
{
	const uint32_t n = pk.rma_iov_count;
	if (!n || n > kMaxRmaIov) {
		EFA_WARN(EpData, "a %s names %u remote iovs (we take 1 to %u): refused", v4::type_name(pk.type), n,
			 kMaxRmaIov);
		return FI_EINVAL;
	}
	RmaIov iov[kMaxRmaIov];
	total = 0;
	for (uint32_t i = 0; i < n; i++) {
		iov[i] = pk.rma(i);
		total += iov[i].len;
	}
	return check_rma(iov, n, access, out);
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
	if (wc.src_known())
		src = av->reverse_lookup(wc.slid, wc.src_qp);
	rx_cq->push(e, src);
}

} // namespace efa::rdm
