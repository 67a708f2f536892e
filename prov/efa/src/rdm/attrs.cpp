/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The efa fabric's fi_info prototype and limits (rdm/attrs.h; the rules: info.h). */
#include "rdm/attrs.h"

#include "info.h"
#include "rdm/pkt.h"

#include <cstdlib>
#include <cstring>

namespace efa {

RdmLimits rdm_limits(const verbs::Device &d)
{
	using namespace rdm;
	const size_t mtu = d.mtu();
	const size_t req_max = kEagerHdrMax + kReqOptMax;
	RdmLimits l;
	l.inject = mtu > req_max ? std::min<size_t>(4096, mtu - req_max) : 0;
	/* A compare carries operand and comparand: half of what follows the headers. */
	const size_t atomic_hdrs = sizeof(v4::Rta) + kReqOptMax + sizeof(RmaIov);
	l.max_atomic = mtu > atomic_hdrs ? ((mtu - atomic_hdrs) / 2) & ~size_t(15) : 0;
	return l;
}

fi_info *rdm_prototype(const verbs::Device &d)
{
	fi_info *i = direct_prototype(d);
	if (!i)
		return nullptr;
	const RdmLimits lim = rdm_limits(d);
	/* RMA and atomics are always offered: emulated by packets where the device lacks
	 * RDMA. */
	const uint64_t caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ |
			      FI_REMOTE_WRITE | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE |
			      FI_LOCAL_COMM | FI_REMOTE_COMM;
	i->caps = caps;
	i->mode = 0;

	fi_tx_attr &tx = *i->tx_attr;
	tx.caps = caps & kRdmTxCaps;
	tx.mode = 0;
	tx.op_flags = FI_TRANSMIT_COMPLETE;
	tx.msg_order = kRdmMsgOrder;
	tx.comp_order = FI_ORDER_NONE;
	tx.inject_size = lim.inject;
	tx.size = kRdmQueueSize;
	tx.iov_limit = kRdmIovLimit;
	tx.rma_iov_limit = 1;

	fi_rx_attr &rx = *i->rx_attr;
	rx.caps = caps & kRdmRxCaps;
	rx.mode = 0;
	rx.op_flags = FI_COMPLETION;
	rx.msg_order = kRdmMsgOrder;
	rx.comp_order = FI_ORDER_NONE;
	rx.total_buffered_recv = 0;
	rx.size = kRdmQueueSize;
	rx.iov_limit = kRdmIovLimit;

	fi_ep_attr &ep = *i->ep_attr;
	ep.protocol_version = rdm::v4::kVersion;
	ep.max_msg_size = SIZE_MAX;
	ep.mem_tag_format = kTagGeneric;
	ep.max_order_raw_size = lim.max_atomic;
	ep.max_order_war_size = lim.max_atomic;
	ep.max_order_waw_size = lim.max_atomic;
	ep.msg_prefix_size = 0;

	fi_domain_attr &dom = *i->domain_attr;
	dom.control_progress = FI_PROGRESS_MANUAL;
	dom.data_progress = FI_PROGRESS_MANUAL;
	dom.mr_mode = int(kRdmMrMode);

	free(i->fabric_attr->name);
	i->fabric_attr->name = strdup(kRdmFabric);
	return i;
}

} // namespace efa
