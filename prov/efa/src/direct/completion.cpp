/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * efa-direct: a device completion becomes a libfabric completion.
 *
 * Transmit: success -> the bound counter, and a CQ entry if the operation asked for
 * one; failure -> the error counter and an error entry (prov_errno = EFA status,
 * err = FI_E* from efa_errno.h, err_data = what to do about it) unless the operation
 * had neither a completion nor a context to report it against.
 * Receive: a posted receive (or, in FI_RX_CQ_DATA mode, a remote write with data that
 * consumed one) or an unsolicited remote write with data, which has no receive.
 */
#include "direct/ep.h"

#include "addr.h"
#include "efa_errno.h"
#include "info.h"
#include "log.h"

#include <cstdio>

namespace efa::direct {

namespace {

std::string error_text(const Ep &ep, uint32_t status, fi_addr_t peer)
{
	char buf[kMaxErrData];
	const char *name = efa_status_name(status);
	std::string who = "unknown peer";
	if (peer != FI_ADDR_UNSPEC && peer != FI_ADDR_NOTAVAIL)
		if (const AvEntry *e = ep.av->lookup(peer))
			who = addr_to_string(e->addr);
	snprintf(buf, sizeof buf, "%s (EFA status %u %s, peer %s)", efa_status_msg(status), status,
		 name ? name : "UNKNOWN", who.c_str());
	return buf;
}

/* The error a receive completion reports; truncation is FI_ETRUNC with olen. */
int rx_error(uint32_t status) { return status == uint32_t(EfaStatus::LOCAL_ERROR_BAD_LENGTH) ? FI_ETRUNC : efa_status_to_fi(status); }

} // namespace

uint32_t Hook::qpn() const { return ep_->qp.qpn(); }

void Hook::on_wc(const verbs::Wc &wc, Cq &cq)
{
	Ep &ep = *ep_;
	const bool ok = wc.ok();

	if (wc.is_recv()) {
		const bool remote_write = wc.remote_write_imm();
		Op *op = wc.unsolicited ? nullptr : reinterpret_cast<Op *>(wc.wr_id);
		fi_addr_t src = FI_ADDR_NOTAVAIL;
		if ((ep.info->caps & FI_SOURCE) && wc.slid != 0xffff)
			src = ep.av->reverse_lookup(wc.slid, wc.src_qp);
		fi_cq_tagged_entry e{};
		if (remote_write) {
			e.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
			e.data = wc.imm;
			e.op_context = op ? op->context : nullptr;
			if (ok && ep.cntr[kCntrRemoteWrite])
				ep.cntr[kCntrRemoteWrite]->inc();
		} else {
			e.flags = FI_MSG | FI_RECV | (wc.has_imm ? FI_REMOTE_CQ_DATA : 0);
			e.op_context = op ? op->context : nullptr;
			e.len = wc.byte_len;
			e.buf = op ? op->buf : nullptr;
			e.data = wc.has_imm ? wc.imm : 0;
			if (ep.cntr[kCntrRecv])
				ok ? ep.cntr[kCntrRecv]->inc() : ep.cntr[kCntrRecv]->inc_err();
		}
		if (ok) {
			if (!op || op->completion)
				cq.push(e, src);
		} else {
			fi_cq_err_entry err{};
			err.op_context = e.op_context;
			err.flags = e.flags;
			err.len = e.len;
			err.buf = e.buf;
			err.data = e.data;
			err.err = rx_error(wc.vendor_err);
			err.prov_errno = int(wc.vendor_err);
			if (op && err.err == FI_ETRUNC) {
				err.len = op->len;
				err.olen = wc.byte_len > op->len ? wc.byte_len - op->len : 0;
			}
			cq.push_error(err, error_text(ep, wc.vendor_err, src));
		}
		if (op) {
			cq.release();
			ep.rx.put(op);
		}
		return;
	}

	Op *op = reinterpret_cast<Op *>(wc.wr_id);
	Cntr *cntr = nullptr;
	switch (op->kind) {
	case OpKind::Send: cntr = ep.cntr[kCntrSend]; break;
	case OpKind::Read: cntr = ep.cntr[kCntrRead]; break;
	case OpKind::Write: cntr = ep.cntr[kCntrWrite]; break;
	case OpKind::Recv: break;
	}
	if (ok) {
		if (cntr)
			cntr->inc();
		if (op->completion) {
			fi_cq_tagged_entry e{};
			e.op_context = op->context;
			e.flags = op->cq_flags;
			e.len = op->kind == OpKind::Send ? 0 : op->len;
			cq.push(e, FI_ADDR_NOTAVAIL);
		}
	} else {
		if (cntr)
			cntr->inc_err();
		if (op->completion || op->context) {
			fi_cq_err_entry err{};
			err.op_context = op->context;
			err.flags = op->cq_flags;
			err.len = op->len;
			err.data = op->data;
			err.err = efa_status_to_fi(wc.vendor_err);
			err.prov_errno = int(wc.vendor_err);
			cq.push_error(err, error_text(ep, wc.vendor_err, op->addr));
		} else {
			EFA_WARN(EpData, "an operation without completion or context failed: %s",
				 error_text(ep, wc.vendor_err, op->addr).c_str());
		}
	}
	cq.release();
	ep.tx.put(op);
}

} // namespace efa::direct
