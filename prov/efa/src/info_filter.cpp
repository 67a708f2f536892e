/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * tailor(): narrows a prototype fi_info to the application's hints, following
 * fi_getinfo(3), fi_domain(3) and fi_mr(3):
 *  - primary capabilities must be requested to be enabled; a primary capability asked
 *    without its modifiers gets all of them, with some only those; secondary ones are
 *    reported when requested (and FI_LOCAL/REMOTE_COMM by default); anything requested
 *    that the provider lacks fails;
 *  - tx_attr/rx_attr caps: a subset of the endpoint's caps, and only the bits that apply
 *    to the direction (fi_endpoint(3)); asked ones must be among the endpoint's;
 *  - every mode the provider requires must be among the modes the application accepts;
 *    modes it does not need are cleared;
 *  - mr_mode: from API 1.5 a bit set of what the application supports, which must
 *    contain every bit the provider requires, and the answer has no other bit
 *    (FI_LOCAL_MR is ignored there); FI_MR_BASIC alone stands for VIRT_ADDR | ALLOCATED
 *    | PROV_KEY (plus FI_MR_LOCAL when the FI_LOCAL_MR mode bit is offered) and comes
 *    back as FI_MR_BASIC; before 1.5 FI_MR_UNSPEC/BASIC/SCALABLE with FI_LOCAL_MR as a
 *    mode bit, answered with FI_MR_BASIC;
 *  - traffic class: FI_TC_UNSPEC, FI_TC_BEST_EFFORT and FI_TC_LOW_LATENCY (tclass.h);
 *  - limits (sizes, iov limits, inject size, max message size) may be asked lower, never
 *    higher; ordering and ordered sizes cannot be asked where none is provided;
 *  - threading, progress, resource management and AV type: any value the provider can
 *    serve is granted as asked.
 * Each failure names the field in `why` (logged at debug level by the caller).
 *
 * The fabrics differ in what they require and provide: efa-direct exposes the device as
 * it is (FI_CONTEXT2 and FI_MR_LOCAL required, nothing ordered, messages up to the MTU);
 * the efa fabric requires no mode, needs mr_mode bits only for RMA and atomics, orders
 * send-after-send and atomics, and has no size limit. FI_EP_DGRAM infos (fabric efa)
 * are the device's UD QPs: as efa-direct without RMA, plus FI_MSG_PREFIX, inject up to
 * the basic inline size, and no FI_DELIVERY_COMPLETE.
 */
#include "info.h"

#include "log.h"
#include "tclass.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

namespace efa {

namespace {

struct Fail {
	std::string *why;
	fi_info *info;
	fi_info *operator()(const char *fmt, ...) __attribute__((format(printf, 2, 3)))
	{
		char buf[256];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(buf, sizeof buf, fmt, ap);
		va_end(ap);
		if (why)
			*why = buf;
		fi_freeinfo(info);
		return nullptr;
	}
};

constexpr uint64_t kMsgMods = FI_SEND | FI_RECV;
constexpr uint64_t kRmaMods = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr uint64_t kComm = FI_LOCAL_COMM | FI_REMOTE_COMM;
/* FI_MR_BASIC as mr_mode bits (fi_mr(3)). */
constexpr int kBasicBits = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

/* Requested caps -> enabled caps: a primary capability asked without any of its
 * modifiers gets all of them (fi_getinfo(3)); FI_LOCAL/REMOTE_COMM by default. */
uint64_t expand_caps(uint64_t want, uint64_t prov)
{
	uint64_t out = want;
	if ((out & (FI_MSG | FI_TAGGED)) && !(out & kMsgMods))
		out |= prov & kMsgMods;
	if ((out & (FI_RMA | FI_ATOMIC)) && !(out & kRmaMods))
		out |= prov & kRmaMods;
	if (!(out & kComm))
		out |= prov & kComm;
	return out;
}

/* fi_getinfo(3): FI_READ, FI_WRITE, FI_REMOTE_READ and FI_REMOTE_WRITE modify FI_RMA or
 * FI_ATOMIC and require one of them. */
bool orphan_rma_modifiers(uint64_t caps) { return (caps & kRmaMods) && !(caps & (FI_RMA | FI_ATOMIC)); }

/* API < 1.5 speaks FI_MR_BASIC, with local registration as the FI_LOCAL_MR mode bit. */
void to_basic(fi_info *info, int prov_mr, uint64_t *mode)
{
	info->domain_attr->mr_mode = FI_MR_BASIC;
	if (prov_mr & FI_MR_LOCAL)
		*mode |= FI_LOCAL_MR;
}

/* Which modes the application accepts for an attribute (0 in the attr: the info's). */
uint64_t app_modes(uint64_t attr_mode, uint64_t info_mode) { return attr_mode ? attr_mode : info_mode; }

bool threading_ok(fi_threading t) { return t <= FI_THREAD_DOMAIN || t == FI_THREAD_COMPLETION || t == FI_THREAD_SAFE; }

} // namespace

fi_info *tailor(const fi_info *proto, const fi_info *hints, uint32_t version, size_t max_inject, std::string *why)
{
	fi_info *info = fi_dupinfo(proto);
	if (!info) {
		if (why)
			*why = "out of memory";
		return nullptr;
	}
	Fail fail{why, info};
	info->fabric_attr->api_version = version;
	if (!hints) {
		/* Everything offered, said in the API version's terms. */
		if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
			to_basic(info, info->domain_attr->mr_mode, &info->mode);
			info->tx_attr->mode = info->rx_attr->mode = info->mode;
		}
		return info;
	}
	/* FI_EP_DGRAM is the device as it is too (over UD QPs), though on fabric efa. */
	const bool dgram = info->ep_attr->type == FI_EP_DGRAM;
	const bool direct = dgram || !strcmp(info->fabric_attr->name, kDirectFabric);
	const uint64_t tx_mask = dgram ? kDgramTxCaps : direct ? kDirectTxCaps : kRdmTxCaps;
	const uint64_t rx_mask = dgram ? kDgramRxCaps : direct ? kDirectRxCaps : kRdmRxCaps;
	const char *fabric = info->fabric_attr->name;
	constexpr uint64_t kRmaCaps = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

	/* ---- endpoint type, address format, names */
	if (hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC && hints->ep_attr->type != info->ep_attr->type)
		return fail("ep_attr->type %d: this candidate is %s", int(hints->ep_attr->type),
			    dgram ? "FI_EP_DGRAM" : "FI_EP_RDM");
	if (hints->addr_format != FI_FORMAT_UNSPEC && hints->addr_format != info->addr_format)
		return fail("addr_format %d: only FI_ADDR_EFA", int(hints->addr_format));
	if (hints->fabric_attr && hints->fabric_attr->name &&
	    strcmp(hints->fabric_attr->name, info->fabric_attr->name))
		return fail("fabric name '%s'", hints->fabric_attr->name);
	if (hints->fabric_attr && hints->fabric_attr->prov_name && !strstr(hints->fabric_attr->prov_name, "efa"))
		return fail("provider name '%s'", hints->fabric_attr->prov_name);
	if (hints->domain_attr && hints->domain_attr->name && strcmp(hints->domain_attr->name, info->domain_attr->name))
		return fail("domain name '%s'", hints->domain_attr->name);
	if (hints->nic && hints->nic->bus_attr && hints->nic->bus_attr->bus_type == FI_BUS_PCI) {
		const fi_bus_attr *want = hints->nic->bus_attr;
		const fi_bus_attr *have = info->nic ? info->nic->bus_attr : nullptr;
		if (!have || have->bus_type != FI_BUS_PCI ||
		    memcmp(&want->attr.pci, &have->attr.pci, sizeof want->attr.pci))
			return fail("nic PCI address");
	}

	/* ---- capabilities */
	const uint64_t prov_caps = info->caps;
	for (uint64_t asked : {hints->caps, hints->tx_attr ? hints->tx_attr->caps : 0,
			       hints->rx_attr ? hints->rx_attr->caps : 0})
		if (orphan_rma_modifiers(asked))
			return fail("caps %#lx: FI_READ, FI_WRITE, FI_REMOTE_READ and FI_REMOTE_WRITE need FI_RMA or "
				    "FI_ATOMIC (fi_getinfo(3))",
				    (unsigned long)asked);
	if (hints->caps & ~prov_caps)
		return fail("caps %#lx not supported", (unsigned long)(hints->caps & ~prov_caps));
	uint64_t caps = hints->caps ? expand_caps(hints->caps, prov_caps) : prov_caps;

	/* ---- modes */
	const uint64_t prov_mode = info->mode;
	const uint64_t accepted = hints->mode;
	if ((prov_mode & FI_CONTEXT2) && !(accepted & FI_CONTEXT2))
		return fail("mode: FI_CONTEXT2 required (the application must pass a struct fi_context2 per operation)");
	if ((prov_mode & FI_MSG_PREFIX) && !(accepted & FI_MSG_PREFIX))
		return fail("mode: FI_MSG_PREFIX required (leave ep_attr->msg_prefix_size bytes in front of every "
			    "send and receive buffer)");
	uint64_t mode = prov_mode & (FI_CONTEXT2 | FI_MSG_PREFIX);
	if (prov_mode & FI_RX_CQ_DATA) {
		/* Remote CQ data needs posted receives on this device. */
		if (accepted & FI_RX_CQ_DATA)
			mode |= FI_RX_CQ_DATA;
		else if (hints->caps & FI_RMA)
			return fail("mode: FI_RX_CQ_DATA required for RMA (the device has no unsolicited write receive)");
		else
			caps &= ~(FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	}

	/* ---- memory registration (fi_mr(3); FI_LOCAL_MR in fi_getinfo(3)) */
	const int user_mr = hints->domain_attr ? hints->domain_attr->mr_mode : 0;
	/* The mr_mode bits the application accepts, and whether it speaks FI_MR_BASIC. */
	int offered = user_mr;
	bool basic = false;
	if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
		if (user_mr == FI_MR_SCALABLE)
			return fail("mr_mode FI_MR_SCALABLE: keys are provider-chosen virtual-address regions "
				    "(use FI_MR_BASIC or FI_MR_UNSPEC)");
		if (user_mr != FI_MR_UNSPEC && user_mr != FI_MR_BASIC)
			return fail("mr_mode %#x: before API 1.5 only FI_MR_UNSPEC, FI_MR_BASIC or FI_MR_SCALABLE",
				    user_mr);
		basic = true;
	} else if (user_mr & FI_MR_SCALABLE) {
		return fail("mr_mode %#x: FI_MR_SCALABLE is not supported (keys are provider-chosen, addresses "
			    "virtual: use FI_MR_BASIC or the mr_mode bits)",
			    user_mr);
	} else if (user_mr & FI_MR_BASIC) {
		if (user_mr != FI_MR_BASIC)
			return fail("mr_mode %#x: FI_MR_BASIC must be set alone (fi_mr(3))", user_mr);
		basic = true;
	}
	if (basic)
		offered = kBasicBits | ((accepted & FI_LOCAL_MR) ? FI_MR_LOCAL : 0);
	/* From 1.5 on, FI_LOCAL_MR means nothing next to mr_mode bits: only FI_MR_LOCAL
	 * offers local registration. */
	int prov_mr = info->domain_attr->mr_mode;
	if (!direct) {
		/* Only RMA and atomics need registration modes; without them, drop those
		 * capabilities unless the application asked for them. */
		if ((offered & prov_mr) != prov_mr) {
			if (hints->caps & kRmaCaps)
				return fail("mr_mode %#x: RMA and atomics need FI_MR_ALLOCATED | FI_MR_PROV_KEY | "
					    "FI_MR_VIRT_ADDR (or FI_MR_BASIC)",
					    user_mr);
			caps &= ~kRmaCaps;
		}
		if (!(caps & (FI_RMA | FI_ATOMIC)))
			prov_mr = 0;
	}
	if ((offered & prov_mr) != prov_mr)
		return fail("mr_mode %#x lacks the required %#x%s", user_mr, prov_mr & ~offered,
			    !(prov_mr & ~offered & FI_MR_LOCAL)	? ""
			    : basic				? " (with FI_MR_BASIC, offer FI_LOCAL_MR in mode)"
			    : (accepted & FI_LOCAL_MR)		? " (from API 1.5 the FI_LOCAL_MR mode bit is ignored next "
								  "to mr_mode bits: set FI_MR_LOCAL)"
								: "");
	if (basic) {
		to_basic(info, prov_mr, &mode);
	} else {
		/* Only the bits required: the efa fabric never needs descriptors (it copies,
		 * or emulates RMA without them), so it does not hand FI_MR_LOCAL back even
		 * when offered. */
		info->domain_attr->mr_mode = prov_mr;
	}
	info->mode = mode;

	/* ---- domain */
	fi_domain_attr &dom = *info->domain_attr;
	if (const fi_domain_attr *h = hints->domain_attr) {
		if (h->threading != FI_THREAD_UNSPEC) {
			if (!threading_ok(h->threading))
				return fail("threading %d", int(h->threading));
			dom.threading = h->threading;
		}
		if (h->control_progress != FI_PROGRESS_UNSPEC)
			dom.control_progress = h->control_progress;
		if (h->data_progress != FI_PROGRESS_UNSPEC)
			dom.data_progress = h->data_progress;
		if (h->resource_mgmt != FI_RM_UNSPEC)
			dom.resource_mgmt = h->resource_mgmt;
		if (h->av_type != FI_AV_UNSPEC) {
			if (h->av_type != FI_AV_TABLE && h->av_type != FI_AV_MAP)
				return fail("av_type %d", int(h->av_type));
			dom.av_type = h->av_type;
		}
		if (h->cq_data_size > dom.cq_data_size)
			return fail("cq_data_size %zu > %zu", h->cq_data_size, dom.cq_data_size);
		if (!(dom.mr_mode & FI_MR_PROV_KEY) && h->mr_key_size > dom.mr_key_size)
			return fail("mr_key_size %zu", h->mr_key_size);
		if (h->caps & ~dom.caps)
			return fail("domain caps %#lx", (unsigned long)(h->caps & ~dom.caps));
		if (h->max_ep_tx_ctx > dom.max_ep_tx_ctx || h->max_ep_rx_ctx > dom.max_ep_rx_ctx)
			return fail("scalable endpoints are not supported");
		if (h->max_ep_stx_ctx || h->max_ep_srx_ctx)
			return fail("shared contexts are not supported");
		if (h->mr_iov_limit > dom.mr_iov_limit)
			return fail("mr_iov_limit %zu > %zu", h->mr_iov_limit, dom.mr_iov_limit);
		if (h->auth_key_size)
			return fail("authorization keys are not supported");
		if (h->tx_ctx_cnt > dom.tx_ctx_cnt || h->rx_ctx_cnt > dom.rx_ctx_cnt)
			return fail("tx/rx_ctx_cnt");
		if (h->cq_cnt > dom.cq_cnt || h->ep_cnt > dom.ep_cnt || h->cntr_cnt > dom.cntr_cnt ||
		    h->mr_cnt > dom.mr_cnt)
			return fail("object counts above the device's");
		if (!tclass_served(h->tclass))
			return fail("domain_attr->tclass %#x: only FI_TC_UNSPEC, FI_TC_BEST_EFFORT, FI_TC_LOW_LATENCY",
				    h->tclass);
		if (h->tclass)
			dom.tclass = h->tclass;
	}

	/* ---- endpoint */
	fi_ep_attr &ep = *info->ep_attr;
	const bool rma = caps & FI_RMA;
	if (direct && !rma) {
		/* Without RMA the largest operation is one send. */
		ep.max_msg_size = info->nic && info->nic->link_attr ? info->nic->link_attr->mtu : ep.max_msg_size;
	}
	if (const fi_ep_attr *h = hints->ep_attr) {
		if (h->protocol != FI_PROTO_UNSPEC && h->protocol != ep.protocol)
			return fail("protocol %u: only FI_PROTO_EFA", h->protocol);
		if (h->protocol_version > ep.protocol_version)
			return fail("protocol_version %u", h->protocol_version);
		if (h->max_msg_size > ep.max_msg_size)
			return fail("max_msg_size %zu > %zu", h->max_msg_size, ep.max_msg_size);
		if (h->max_msg_size)
			ep.max_msg_size = h->max_msg_size;
		if (h->max_order_raw_size > ep.max_order_raw_size || h->max_order_war_size > ep.max_order_war_size ||
		    h->max_order_waw_size > ep.max_order_waw_size)
			return fail("ordered sizes above %zu bytes (%s)", ep.max_order_raw_size, fabric);
		/* Matching compares all 64 bits: any tag format the application chooses fits. */
		if (!direct && h->mem_tag_format)
			ep.mem_tag_format = h->mem_tag_format;
		if (h->tx_ctx_cnt > 1 || h->rx_ctx_cnt > 1)
			return fail("tx_ctx_cnt/rx_ctx_cnt %zu/%zu: no scalable endpoints", h->tx_ctx_cnt, h->rx_ctx_cnt);
		if (h->auth_key_size)
			return fail("authorization keys are not supported");
	}

	/* ---- transmit */
	fi_tx_attr &tx = *info->tx_attr;
	tx.caps = caps & tx_mask;
	tx.mode = info->mode;
	if (const fi_tx_attr *h = hints->tx_attr) {
		/* fi_endpoint(3): a subset of the endpoint's capabilities. */
		if (h->caps & ~(caps & tx_mask))
			return fail("tx_attr->caps %#lx: %#lx not among the endpoint's transmit caps %#lx",
				    (unsigned long)h->caps, (unsigned long)(h->caps & ~(caps & tx_mask)),
				    (unsigned long)(caps & tx_mask));
		if (h->caps)
			tx.caps = expand_caps(h->caps, caps) & tx_mask;
		if ((prov_mode & FI_CONTEXT2) && !(app_modes(h->mode, accepted) & FI_CONTEXT2))
			return fail("tx_attr->mode lacks FI_CONTEXT2");
		if ((prov_mode & FI_MSG_PREFIX) && !(app_modes(h->mode, accepted) & FI_MSG_PREFIX))
			return fail("tx_attr->mode lacks FI_MSG_PREFIX");
		const uint64_t tx_flags = dgram ? kDgramTxOpFlags : kTxOpFlags;
		if (h->op_flags & ~tx_flags)
			return fail("tx_attr->op_flags %#lx%s", (unsigned long)(h->op_flags & ~tx_flags),
				    dgram ? " (FI_EP_DGRAM is unreliable: no delivery complete)" : "");
		if (h->op_flags)
			tx.op_flags = h->op_flags;
		if (h->msg_order & ~tx.msg_order)
			return fail("tx_attr->msg_order %#lx: %s orders only %#lx%s", (unsigned long)h->msg_order, fabric,
				    (unsigned long)tx.msg_order, direct ? " (use the efa fabric)" : "");
		if (!direct && h->msg_order)
			tx.msg_order = h->msg_order;
		if (h->comp_order & ~tx.comp_order)
			return fail("tx_attr->comp_order %#lx", (unsigned long)h->comp_order);
		if (h->inject_size) {
			/* efa-direct: above the basic inline size, wide work requests carry up to
			 * max_inject. efa: what one eager packet carries. DGRAM: UD work requests
			 * have no wide form. */
			const size_t most = direct && !dgram ? std::max(tx.inject_size, max_inject) : tx.inject_size;
			if (h->inject_size > most)
				return fail("inject_size %zu > %zu", h->inject_size, most);
			tx.inject_size = h->inject_size;
		}
		if (h->size > tx.size)
			return fail("tx_attr->size %zu > %zu", h->size, tx.size);
		if (h->size)
			tx.size = h->size;
		if (h->iov_limit > tx.iov_limit)
			return fail("tx_attr->iov_limit %zu > %zu", h->iov_limit, tx.iov_limit);
		if (h->rma_iov_limit > tx.rma_iov_limit)
			return fail("rma_iov_limit %zu > %zu", h->rma_iov_limit, tx.rma_iov_limit);
		if (!tclass_served(h->tclass))
			return fail("tx_attr->tclass %#x: only FI_TC_UNSPEC, FI_TC_BEST_EFFORT, FI_TC_LOW_LATENCY",
				    h->tclass);
		if (h->tclass)
			tx.tclass = h->tclass;
	}

	/* ---- receive */
	fi_rx_attr &rx = *info->rx_attr;
	rx.caps = caps & rx_mask;
	rx.mode = info->mode;
	if (const fi_rx_attr *h = hints->rx_attr) {
		if (h->caps & ~(caps & rx_mask))
			return fail("rx_attr->caps %#lx: %#lx not among the endpoint's receive caps %#lx",
				    (unsigned long)h->caps, (unsigned long)(h->caps & ~(caps & rx_mask)),
				    (unsigned long)(caps & rx_mask));
		if (h->caps)
			rx.caps = expand_caps(h->caps, caps) & rx_mask;
		if ((prov_mode & FI_CONTEXT2) && !(app_modes(h->mode, accepted) & FI_CONTEXT2))
			return fail("rx_attr->mode lacks FI_CONTEXT2");
		if ((prov_mode & FI_MSG_PREFIX) && !(app_modes(h->mode, accepted) & FI_MSG_PREFIX))
			return fail("rx_attr->mode lacks FI_MSG_PREFIX");
		const uint64_t rx_flags = direct ? kRxOpFlags : kRdmRxOpFlags;
		if (h->op_flags & ~rx_flags)
			return fail("rx_attr->op_flags %#lx%s", (unsigned long)(h->op_flags & ~rx_flags),
				    direct ? " (no multi-receive on efa-direct)" : "");
		if (h->op_flags)
			rx.op_flags = h->op_flags;
		if (h->msg_order & ~rx.msg_order)
			return fail("rx_attr->msg_order %#lx: %s orders only %#lx%s", (unsigned long)h->msg_order, fabric,
				    (unsigned long)rx.msg_order, direct ? " (use the efa fabric)" : "");
		if (!direct && h->msg_order)
			rx.msg_order = h->msg_order;
		if (h->comp_order & ~rx.comp_order)
			return fail("rx_attr->comp_order %#lx", (unsigned long)h->comp_order);
		if (h->size > rx.size)
			return fail("rx_attr->size %zu > %zu", h->size, rx.size);
		if (h->size)
			rx.size = h->size;
		if (h->iov_limit > rx.iov_limit)
			return fail("rx_attr->iov_limit %zu > %zu", h->iov_limit, rx.iov_limit);
	}
	info->caps = caps;
	return info;
}

} // namespace efa
