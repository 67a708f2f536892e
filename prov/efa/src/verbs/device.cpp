/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "verbs/device.h"

#include "log.h"

#include <atomic>
#include <climits>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace efa::verbs {

namespace {

bool allowed(const std::string &allow, const std::string &name)
{
	if (allow.empty() || allow == "all")
		return true;
	std::stringstream ss(allow);
	std::string item;
	while (std::getline(ss, item, ','))
		if (item == name)
			return true;
	return false;
}

/* ibv_query_port without the verbs.h macro, whose fallback would link libibverbs. */
int query_port(const Api &api, ibv_context *ctx, ibv_port_attr &out)
{
	std::memset(&out, 0, sizeof out);
	if (verbs_context *v = verbs_get_ctx_op(ctx, query_port))
		return v->query_port(ctx, 1, &out, sizeof out);
	return api.query_port(ctx, 1, reinterpret_cast<_compat_ibv_port_attr *>(&out));
}

/* <ibdev_path>/device -> ../../../0000:00:06.0 */
bool read_pci(const ibv_device *dev, PciAddr &out)
{
	std::string link = std::string(dev->ibdev_path) + "/device";
	char resolved[PATH_MAX];
	if (!realpath(link.c_str(), resolved))
		return false;
	const char *base = std::strrchr(resolved, '/');
	unsigned dom, bus, d, fn;
	if (!base || sscanf(base + 1, "%x:%x:%x.%x", &dom, &bus, &d, &fn) != 4)
		return false;
	out = PciAddr{uint16_t(dom), uint8_t(bus), uint8_t(d), uint8_t(fn)};
	return true;
}

} // namespace

uint64_t Device::link_speed_bps() const
{
	/* ibv_port_attr encodings (IB spec): per-lane rate and lane count */
	double lane_gbps;
	switch (port_.active_speed) {
	case 1: lane_gbps = 2.5; break;
	case 2: lane_gbps = 5; break;
	case 4: case 8: lane_gbps = 10; break;
	case 16: lane_gbps = 14.0625; break;
	case 32: lane_gbps = 25.78125; break;
	case 64: lane_gbps = 50; break;
	case 128: lane_gbps = 100; break;
	default: lane_gbps = 25; break;
	}
	int lanes;
	switch (port_.active_width) {
	case 1: lanes = 1; break;
	case 2: lanes = 4; break;
	case 4: lanes = 8; break;
	case 8: lanes = 12; break;
	case 16: lanes = 2; break;
	default: lanes = 4; break;
	}
	return uint64_t(lane_gbps * lanes * 1e9);
}

Device::~Device()
{
	if (ctx_)
		api_->close_device(ctx_);
}

Result<std::unique_ptr<Device>> Device::open(const Api &api, ibv_device *dev)
{
	std::unique_ptr<Device> d(new Device());
	d->api_ = &api;
	const char *name = api.get_device_name(dev);
	d->name_ = name ? name : "?";
	d->ctx_ = api.open_device(dev);
	if (!d->ctx_) {
		int err = errno ? errno : ENODEV;
		EFA_WARN(Core, "cannot open device %s: %s", d->name_.c_str(), strerror(err));
		return Err{-err};
	}
	/*
	 * EOPNOTSUPP: not an EFA device, skipped silently as upstream does. An rdma-core that
	 * predates device_caps refuses the current inlen: ask again with the first layout.
	 * (rdma-core 44 accepts the current size; its reserved bytes read as a zero
	 * inline_buf_size_ex, which inline_size_ex() treats as "no wide inline".)
	 */
	int ret = api.efadv_query_device(d->ctx_, reinterpret_cast<efadv_device_attr *>(&d->efa_), sizeof d->efa_);
	if (ret == EINVAL) {
		std::memset(&d->efa_, 0, sizeof d->efa_);
		ret = api.efadv_query_device(d->ctx_, reinterpret_cast<efadv_device_attr *>(&d->efa_),
					     EFADV_DEVICE_ATTR_V1_SIZE);
	}
	if (ret) {
		EFA_DBG(Core, "%s is not an EFA device (efadv_query_device: %s)", d->name_.c_str(), strerror(ret));
		return Err{-ENODEV};
	}
	if ((ret = api.query_device(d->ctx_, &d->attr_))) {
		EFA_WARN(Core, "%s: ibv_query_device failed: %s", d->name_.c_str(), strerror(ret));
		return Err{-ret};
	}
	if ((ret = query_port(api, d->ctx_, d->port_))) {
		EFA_WARN(Core, "%s: ibv_query_port failed: %s", d->name_.c_str(), strerror(ret));
		return Err{-ret};
	}
	if ((ret = api.query_gid(d->ctx_, 1, 0, &d->gid_))) {
		EFA_WARN(Core, "%s: ibv_query_gid failed: %s", d->name_.c_str(), strerror(ret));
		return Err{-ret};
	}
	d->has_pci_ = !api.software && read_pci(dev, d->pci_);
	return d;
}

std::vector<std::unique_ptr<Device>> Device::discover(const Api &api, const std::string &allow)
{
	std::vector<std::unique_ptr<Device>> out;
	int n = 0;
	errno = 0;
	ibv_device **list = api.get_device_list(&n);
	if (!list) {
		EFA_INFO(Core, "%s: no device list (%s)", api.origin.c_str(), strerror(errno ? errno : ENODEV));
		return out;
	}
	for (int i = 0; i < n; i++) {
		const char *name = api.get_device_name(list[i]);
		if (!allowed(allow, name ? name : "")) {
			EFA_INFO(Core, "device %s skipped: not in FI_EFA_IFACE=%s", name, allow.c_str());
			continue;
		}
		auto d = open(api, list[i]);
		if (d.ok())
			out.push_back(d.take());
	}
	api.free_device_list(list);
	return out;
}

namespace {

uint32_t pow2_floor(uint32_t v)
{
	uint32_t r = 1;
	while (v && r <= v / 2)
		r <<= 1;
	return v ? r : 0;
}

/* Once per process: the depths come from the rule, not from rdma-core. */
void note_no_depth_query(const Api &api)
{
	static std::atomic<bool> said{false};
	if (!said.exchange(true))
		EFA_INFO(Core, "%s has no efadv_get_max_sq_depth/efadv_get_max_rq_depth (rdma-core before 2026): "
			 "queue depths follow max_sq_wr/max_rq_wr, halved for wide send entries",
			 api.origin.c_str());
}

} // namespace

uint32_t Device::max_sq_depth(bool inline_write, uint32_t max_inline, uint32_t max_send_sge) const
{
	if (api_->efadv_get_max_sq_depth) {
		efadv_sq_depth_attr a{};
		a.flags = inline_write ? EFADV_SQ_DEPTH_ATTR_INLINE_WRITE : 0;
		a.max_send_sge = max_send_sge;
		a.max_rdma_sge = uint32_t(std::max(attr_.max_sge_rd, 1));
		a.max_inline_data = max_inline;
		const int d = api_->efadv_get_max_sq_depth(ctx_, &a, sizeof a);
		if (d > 0)
			return std::min<uint32_t>(uint32_t(d), efa_.max_sq_wr);
		EFA_WARN_ONCE(Core, "%s: efadv_get_max_sq_depth(inline %u%s): %s; sizing by max_sq_wr instead",
			      name_.c_str(), max_inline, inline_write ? ", inline write" : "", strerror(-d));
	} else {
		note_no_depth_query(*api_);
	}
	const bool wide = inline_write || max_inline > inline_size();
	return wide ? efa_.max_sq_wr / 2 : efa_.max_sq_wr;
}

uint32_t Device::max_rq_depth(uint32_t max_recv_sge) const
{
	if (api_->efadv_get_max_rq_depth) {
		efadv_rq_depth_attr a{};
		a.max_recv_sge = max_recv_sge;
		const int d = api_->efadv_get_max_rq_depth(ctx_, &a, sizeof a);
		if (d > 0)
			return std::min<uint32_t>(uint32_t(d), efa_.max_rq_wr);
		EFA_WARN_ONCE(Core, "%s: efadv_get_max_rq_depth(%u SGEs): %s; sizing by max_rq_wr instead", name_.c_str(),
			      max_recv_sge, strerror(-d));
	} else {
		note_no_depth_query(*api_);
	}
	return pow2_floor(efa_.max_rq_wr / std::max<uint32_t>(max_recv_sge, 1));
}

std::string Device::describe() const
{
	std::string s = name_ + (software() ? " (software device, " + api_->origin + ")" : " (hardware)");
	char buf[160];
	snprintf(buf, sizeof buf, ": part %#x, MTU %u, inline %u/%u, max RDMA %u", attr_.vendor_part_id, mtu(),
		 inline_size(), inline_size_ex(), max_rdma_size());
	s += buf;
	s += rdma_read() ? ", RDMA read" : "";
	s += rdma_write() ? ", RDMA write" : "";
	s += unsolicited_write_recv() ? ", unsolicited write recv" : "";
	s += rnr_retry() ? ", RNR retry" : "";
	return s;
}

} // namespace efa::verbs
