/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * FI_EP_DGRAM: a device completion becomes a libfabric completion.
 *
 * Transmit: success (the datagram left; nothing says it arrived) -> the bound counter and
 * a CQ entry if the operation asked for one; failure (a local error: too long, a bad
 * buffer, flushed) -> the error counter and an error entry. Receive: the length counts
 * the message prefix (the device's GRH), as FI_MSG_PREFIX has it; a buffer too short for
 * the datagram completes with FI_ETRUNC (olen: what did not fit).
 */
#include "dgram/ep.h"

#include "addr.h"
#include "efa_errno.h"
#include "info.h"
#include "log.h"

#include <cstdio>

namespace efa::dgram {

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

} // namespace

uint32_t Hook::qpn() const { return ep_->qp.qpn(); }

void Hook::on_wc(const verbs::Wc &wc, Cq &cq)
{
	Ep &ep = *ep_;
	const bool ok = wc.ok();
	Op *op = reinterpret_cast<Op *>(wc.wr_id);

	if (wc.is_recv()) {
		fi_addr_t src = FI_ADDR_NOTAVAIL;
		if ((ep.info->caps & FI_SOURCE) && wc.slid != 0xffff)
			src = ep.av->reverse_lookup(wc.slid, wc.src_qp);
		fi_cq_tagged_entry e{};
		e.op_context = op->context;
		e.flags = FI_MSG | FI_RECV | (wc.has_imm ? FI_REMOTE_CQ_DATA : 0);
		e.len = wc.byte_len; /* prefix included */
		e.buf = op->buf;
		e.data = wc.has_imm ? wc.imm : 0;
		ep.count(kCntrRecv, ok);
		if (ok) {
			if (op->completion)
				cq.push(e, src);
		} else {
			fi_cq_err_entry err{};
			err.op_context = e.op_context;
			err.flags = e.flags;
			err.buf = e.buf;
			err.data = e.data;
			err.prov_errno = int(wc.vendor_err);
			if (wc.vendor_err == uint32_t(EfaStatus::LOCAL_ERROR_BAD_LENGTH)) {
				/* Nothing was placed: say how large receive buffers must be. */
				err.err = FI_ETRUNC;
				err.len = op->len;
				err.olen = wc.byte_len > op->len ? wc.byte_len - op->len : 0;
				char text[kMaxErrData];
				snprintf(text, sizeof text,
					 "Datagram of %u bytes (prefix included) longer than the receive buffer of %zu; "
					 "post receives of msg_prefix_size + max_msg_size (%zu) bytes (EFA status 6 "
					 "LOCAL_ERROR_BAD_LENGTH)",
					 wc.byte_len, op->len, ep.prefix + ep.mtu);
				cq.push_error(err, text);
			} else {
				err.err = efa_status_to_fi(wc.vendor_err);
				cq.push_error(err, error_text(ep, wc.vendor_err, src));
			}
		}
		cq.release();
		ep.rx.put(op);
		return;
	}

	ep.count(kCntrSend, ok);
	if (ok) {
		if (op->completion) {
			fi_cq_tagged_entry e{};
			e.op_context = op->context;
			e.flags = op->cq_flags;
			cq.push(e, FI_ADDR_NOTAVAIL);
		}
	} else if (op->completion || op->context) {
		fi_cq_err_entry err{};
		err.op_context = op->context;
		err.flags = op->cq_flags;
		err.len = op->len;
		err.data = op->data;
		err.err = efa_status_to_fi(wc.vendor_err);
		err.prov_errno = int(wc.vendor_err);
		cq.push_error(err, error_text(ep, wc.vendor_err, op->addr));
	} else {
		EFA_WARN(EpData, "a datagram without completion or context failed: %s",
			 error_text(ep, wc.vendor_err, op->addr).c_str());
	}
	cq.release();
	ep.tx.put(op);
}

} // namespace efa::dgram
