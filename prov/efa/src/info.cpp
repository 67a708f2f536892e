/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The prototype infos of a device (efa-direct, efa, FI_EP_DGRAM), its fid_nic, and
 * fi_getinfo's assembly of the answer (node/service/FI_SOURCE, src/dest addresses, device
 * order). The filter of hints is info_filter.cpp.
 */
#include "info.h"

#include "addr.h"
#include "fid.h"
#include "log.h"
#include "params.h"
#include "topology.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace efa {

namespace {

char *dup(const std::string &s) { return strdup(s.c_str()); }

uint32_t rounddown_pow2(uint32_t v)
{
	uint32_t r = 1;
	while (r * 2 <= v)
		r *= 2;
	return v ? r : 0;
}

/* ---------------------------------------------------------------- fid_nic */
/* libfabric frees a nic with fi_close() and copies it with fi_control(FI_DUP). */

int nic_close(fid *f);
int nic_control(fid *f, int command, void *arg);

fi_ops g_nic_ops = {
	.size = sizeof(fi_ops),
	.close = nic_close,
	.bind = no_bind,
	.control = nic_control,
	.ops_open = no_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

void free_nic(fid_nic *nic)
{
	if (!nic)
		return;
	if (fi_device_attr *d = nic->device_attr) {
		free(d->name);
		free(d->device_id);
		free(d->device_version);
		free(d->vendor_id);
		free(d->driver);
		free(d->firmware);
		free(d);
	}
	free(nic->bus_attr);
	if (fi_link_attr *l = nic->link_attr) {
		free(l->address);
		free(l->network_type);
		free(l);
	}
	free(nic);
}

char *sdup(const char *s) { return s ? strdup(s) : nullptr; }

fid_nic *dup_nic(const fid_nic *src)
{
	auto *n = static_cast<fid_nic *>(calloc(1, sizeof(fid_nic)));
	if (!n)
		return nullptr;
	n->fid.fclass = FI_CLASS_NIC;
	n->fid.ops = &g_nic_ops;
	if (src->device_attr) {
		n->device_attr = static_cast<fi_device_attr *>(calloc(1, sizeof(fi_device_attr)));
		const fi_device_attr *s = src->device_attr;
		if (n->device_attr) {
			n->device_attr->name = sdup(s->name);
			n->device_attr->device_id = sdup(s->device_id);
			n->device_attr->device_version = sdup(s->device_version);
			n->device_attr->vendor_id = sdup(s->vendor_id);
			n->device_attr->driver = sdup(s->driver);
			n->device_attr->firmware = sdup(s->firmware);
		}
	}
	if (src->bus_attr) {
		n->bus_attr = static_cast<fi_bus_attr *>(malloc(sizeof(fi_bus_attr)));
		if (n->bus_attr)
			*n->bus_attr = *src->bus_attr;
	}
	if (src->link_attr) {
		n->link_attr = static_cast<fi_link_attr *>(calloc(1, sizeof(fi_link_attr)));
		if (n->link_attr) {
			*n->link_attr = *src->link_attr;
			n->link_attr->address = sdup(src->link_attr->address);
			n->link_attr->network_type = sdup(src->link_attr->network_type);
		}
	}
	return n;
}

int nic_close(fid *f)
{
	free_nic(reinterpret_cast<fid_nic *>(f));
	return 0;
}

int nic_control(fid *f, int command, void *arg)
{
	if (command != FI_DUP || !arg)
		return -FI_ENOSYS;
	fid_nic *n = dup_nic(reinterpret_cast<fid_nic *>(f));
	if (!n)
		return -FI_ENOMEM;
	*static_cast<fid_nic **>(arg) = n;
	return 0;
}

fid_nic *make_nic(const verbs::Device &d)
{
	fid_nic src{};
	fi_device_attr dev{};
	fi_bus_attr bus{};
	fi_link_attr link{};
	char part[16], vendor[16];
	snprintf(part, sizeof part, "0x%04x", d.attr().vendor_part_id);
	snprintf(vendor, sizeof vendor, "0x%04x", d.attr().vendor_id);
	dev.name = const_cast<char *>(d.name().c_str());
	dev.device_id = part;
	dev.vendor_id = vendor;
	dev.driver = const_cast<char *>(d.software() ? "efasim" : "efa");
	dev.firmware = const_cast<char *>(d.attr().fw_ver);
	if (const verbs::PciAddr *p = d.pci()) {
		bus.bus_type = FI_BUS_PCI;
		bus.attr.pci = fi_pci_attr{p->domain, p->bus, p->dev, p->fn};
	} else {
		bus.bus_type = FI_BUS_UNKNOWN;
	}
	std::string addr = "EFA-" + gid_to_string(d.gid().raw);
	link.address = const_cast<char *>(addr.c_str());
	link.mtu = d.mtu();
	link.speed = d.link_speed_bps();
	link.state = d.port_active() ? FI_LINK_UP : FI_LINK_DOWN;
	link.network_type = const_cast<char *>("Ethernet");
	src.device_attr = &dev;
	src.bus_attr = &bus;
	src.link_attr = &link;
	return dup_nic(&src);
}

bool gid_matches(const verbs::Device &d, const uint8_t gid[16])
{
	return std::memcmp(d.gid().raw, gid, 16) == 0;
}

} // namespace

fi_info *direct_prototype(const verbs::Device &d)
{
	fi_info *i = fi_allocinfo();
	if (!i)
		return nullptr;
	/* RMA needs both RDMA read and write; remote CQ data needs unsolicited write
	 * receive, or receives posted for it (FI_RX_CQ_DATA, left to tailor()). */
	const bool rma = d.rdma_read() && d.rdma_write();
	uint64_t caps = FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
	if (rma)
		caps |= FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	uint64_t mode = FI_CONTEXT2;
	if (rma && (!d.unsolicited_write_recv() || !params().use_unsolicited_write_recv))
		mode |= FI_RX_CQ_DATA;
	i->caps = caps;
	i->mode = mode;
	i->addr_format = FI_ADDR_EFA;
	RawAddr self{};
	std::memcpy(self.gid, d.gid().raw, 16);
	i->src_addr = malloc(kAddrLen);
	std::memcpy(i->src_addr, &self, kAddrLen);
	i->src_addrlen = kAddrLen;

	fi_tx_attr &tx = *i->tx_attr;
	tx.caps = caps & kDirectTxCaps;
	tx.mode = mode;
	tx.op_flags = FI_TRANSMIT_COMPLETE;
	tx.msg_order = FI_ORDER_NONE;
	tx.comp_order = FI_ORDER_NONE;
	tx.inject_size = d.inline_size();
	tx.size = rounddown_pow2(d.efa().max_sq_wr);
	tx.iov_limit = d.efa().max_sq_sge;
	tx.rma_iov_limit = 1;

	fi_rx_attr &rx = *i->rx_attr;
	rx.caps = caps & kDirectRxCaps;
	rx.mode = mode;
	rx.op_flags = 0;
	rx.msg_order = FI_ORDER_NONE;
	rx.comp_order = FI_ORDER_NONE;
	rx.size = rounddown_pow2(d.efa().max_rq_wr / std::max<uint32_t>(d.efa().max_rq_sge, 1));
	rx.iov_limit = d.efa().max_rq_sge;

	fi_ep_attr &ep = *i->ep_attr;
	ep.type = FI_EP_RDM;
	ep.protocol = FI_PROTO_EFA;
	ep.protocol_version = 1;
	ep.max_msg_size = rma ? std::max<size_t>(d.mtu(), d.max_rdma_size()) : d.mtu();
	ep.tx_ctx_cnt = 1;
	ep.rx_ctx_cnt = 1;

	fi_domain_attr &dom = *i->domain_attr;
	dom.name = dup(d.name() + "-rdm");
	dom.threading = FI_THREAD_SAFE;
	dom.control_progress = FI_PROGRESS_AUTO;
	dom.data_progress = FI_PROGRESS_AUTO;
	dom.resource_mgmt = FI_RM_ENABLED;
	dom.av_type = FI_AV_TABLE;
	dom.mr_mode = int(kDirectMrMode);
	dom.mr_key_size = 4;
	dom.cq_data_size = 4;
	dom.cq_cnt = size_t(d.attr().max_cq);
	dom.ep_cnt = size_t(d.attr().max_qp);
	dom.tx_ctx_cnt = std::min<size_t>(1024, size_t(d.attr().max_qp));
	dom.rx_ctx_cnt = dom.tx_ctx_cnt;
	dom.max_ep_tx_ctx = 1;
	dom.max_ep_rx_ctx = 1;
	dom.cntr_cnt = 1024;
	dom.mr_iov_limit = 1;
	dom.caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
	dom.max_err_data = kMaxErrData;
	dom.mr_cnt = size_t(d.attr().max_mr);

	i->fabric_attr->name = strdup(kDirectFabric);
	i->nic = make_nic(d);
	return i;
}

fi_info *dgram_prototype(const verbs::Device &d)
{
	fi_info *i = direct_prototype(d);
	if (!i)
		return nullptr;
	/* Sends and receives over a UD QP: no RMA, no tags, one datagram of at most the MTU,
	 * the GRH of a receive in the application's prefix. */
	const uint64_t caps = FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
	const uint64_t mode = FI_CONTEXT2 | FI_MSG_PREFIX;
	i->caps = caps;
	i->mode = mode;

	fi_tx_attr &tx = *i->tx_attr;
	tx.caps = caps & kDgramTxCaps;
	tx.mode = mode;
	tx.op_flags = FI_TRANSMIT_COMPLETE;
	tx.inject_size = d.inline_size(); /* UD work requests have no wide inline form */
	tx.rma_iov_limit = 0;

	fi_rx_attr &rx = *i->rx_attr;
	rx.caps = caps & kDgramRxCaps;
	rx.mode = mode;

	fi_ep_attr &ep = *i->ep_attr;
	ep.type = FI_EP_DGRAM;
	ep.max_msg_size = d.mtu();
	ep.msg_prefix_size = kMsgPrefixSize;

	fi_domain_attr &dom = *i->domain_attr;
	free(dom.name);
	dom.name = dup(d.name() + "-dgrm");

	free(i->fabric_attr->name);
	i->fabric_attr->name = strdup(kRdmFabric);
	return i;
}

const verbs::Device *device_of(const fi_info *info, const std::vector<const verbs::Device *> &devs, bool *dgram)
{
	if (!info || !info->domain_attr || !info->domain_attr->name)
		return nullptr;
	for (const verbs::Device *d : devs) {
		for (bool dg : {false, true}) {
			if (d->name() + (dg ? "-dgrm" : "-rdm") != info->domain_attr->name)
				continue;
			if (dgram)
				*dgram = dg;
			return d;
		}
	}
	return nullptr;
}

int build_infos(uint32_t version, const char *node, const char *service, uint64_t flags, const fi_info *hints,
		const std::vector<const verbs::Device *> &devs, fi_info **out)
{
	*out = nullptr;
	/* Addresses given by the caller, in the provider's format. */
	RawAddr dest{};
	bool have_dest = false;
	const uint8_t *want_gid = nullptr;
	RawAddr src{};
	if (hints && hints->addr_format != FI_FORMAT_UNSPEC && hints->addr_format != FI_ADDR_EFA) {
		EFA_DBG(Core, "hints->addr_format %d: only FI_ADDR_EFA", int(hints->addr_format));
		return -FI_ENODATA;
	}
	if (flags & FI_SOURCE) {
		if (node && !addr_from_node_service(node, nullptr, src)) {
			EFA_DBG(Core, "node '%s' (FI_SOURCE) is not the GID of an EFA device", node);
			return -FI_ENODATA;
		}
		if (node)
			want_gid = src.gid;
	} else if (node || service) {
		if (!addr_from_node_service(node, service, dest) || !node) {
			EFA_DBG(Core, "node '%s' service '%s' is not an EFA address (node: the GID in IPv6 text, "
				"service: '<qpn>:<qkey>')",
				node ? node : "", service ? service : "");
			return -FI_ENODATA;
		}
		have_dest = true;
	}
	if (hints && hints->src_addr) {
		if (hints->src_addrlen != kAddrLen) {
			EFA_DBG(Core, "hints->src_addrlen %zu: FI_ADDR_EFA addresses are %zu bytes", hints->src_addrlen,
				kAddrLen);
			return -FI_ENODATA;
		}
		want_gid = static_cast<const RawAddr *>(hints->src_addr)->gid;
	}
	if (hints && hints->dest_addr) {
		if (hints->dest_addrlen != kAddrLen) {
			EFA_DBG(Core, "hints->dest_addrlen %zu: FI_ADDR_EFA addresses are %zu bytes",
				hints->dest_addrlen, kAddrLen);
			return -FI_ENODATA;
		}
		std::memcpy(&dest, hints->dest_addr, kAddrLen);
		have_dest = true;
	}

	fi_info *head = nullptr, **tail = &head;
	const std::vector<size_t> order = order_by_locality(devs);
	/* efa-direct, then the efa fabric, then FI_EP_DGRAM (fabric efa, domain -dgrm). */
	static const char *const kinds[] = {kDirectFabric, kRdmFabric, "efa (FI_EP_DGRAM)"};
	for (int fabric = 0; fabric < 3; fabric++)
	for (size_t idx : order) {
		const verbs::Device &d = *devs[idx];
		if (want_gid && !gid_matches(d, want_gid)) {
			EFA_DBG(Core, "%s: not the device of the requested source address", d.name().c_str());
			continue;
		}
		fi_info *proto = fabric == 0 ? direct_prototype(d) : fabric == 1 ? rdm_prototype(d) : dgram_prototype(d);
		if (!proto) {
			fi_freeinfo(head);
			return -FI_ENOMEM;
		}
		std::string why;
		fi_info *info = tailor(proto, hints, version, d.inline_size_ex(), &why);
		fi_freeinfo(proto);
		if (!info) {
			EFA_DBG(Core, "%s on %s: %s", kinds[fabric], d.name().c_str(), why.c_str());
			continue;
		}
		if (have_dest) {
			info->dest_addr = malloc(kAddrLen);
			std::memcpy(info->dest_addr, &dest, kAddrLen);
			info->dest_addrlen = kAddrLen;
		}
		*tail = info;
		tail = &info->next;
	}
	if (!head)
		return -FI_ENODATA;
	*out = head;
	return 0;
}

} // namespace efa
