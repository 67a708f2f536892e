/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * L1: an EFA device (hardware or software): its open context and every attribute the
 * provider reads, queried once. Only L1 includes the rdma-core headers; L2/L3 ask a
 * Device for capabilities in provider terms.
 */
#ifndef EFA_VERBS_DEVICE_H
#define EFA_VERBS_DEVICE_H

#include "common/result.h"
#include "verbs/api.h"

#include <memory>
#include <string>
#include <vector>

namespace efa::verbs {

/* PCI location of a hardware device (from sysfs). */
struct PciAddr {
	uint16_t domain;
	uint8_t bus, dev, fn;
};

class Device {
public:
	~Device();
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;

	/*
	 * Opens every EFA device `api` lists (devices whose efadv_query_device fails are not
	 * EFA and are skipped). `allow` is FI_EFA_IFACE: "all" or a comma-separated name list.
	 */
	static std::vector<std::unique_ptr<Device>> discover(const Api &api, const std::string &allow = "all");

	const Api &api() const { return *api_; }
	ibv_context *ctx() const { return ctx_; }
	const std::string &name() const { return name_; }
	bool software() const { return api_->software; }

	const ibv_device_attr &attr() const { return attr_; }
	const ibv_port_attr &port() const { return port_; }
	bool port_active() const { return port_.state == IBV_PORT_ACTIVE; }
	const efadv_device_attr_cur &efa() const { return efa_; }
	const ibv_gid &gid() const { return gid_; }

	bool rdma_read() const { return efa_.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ; }
	bool rdma_write() const { return efa_.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE; }
	bool rnr_retry() const { return efa_.device_caps & EFADV_DEVICE_ATTR_CAPS_RNR_RETRY; }
	bool cq_with_sgid() const { return efa_.device_caps & EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID; }
	bool unsolicited_write_recv() const { return efa_.device_caps & EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV; }
	uint32_t mtu() const { return port_.max_msg_sz; }
	uint32_t max_rdma_size() const { return efa_.max_rdma_size; }
	uint16_t inline_size() const { return efa_.inline_buf_size; }
	/* Inline bytes with wide work requests; == inline_size() when the device has none. */
	uint16_t inline_size_ex() const { return efa_.inline_buf_size_ex ? efa_.inline_buf_size_ex : efa_.inline_buf_size; }

	/*
	 * The deepest send queue the device allows for a QP with these attributes: wide
	 * entries (inline RDMA write, or inline beyond inline_size()) take more of the
	 * queue's memory. Asks efadv_get_max_sq_depth when the loaded rdma-core has it;
	 * without it (rdma-core before 2026, Debian's 44 among them) applies EFA's rule of
	 * half as many wide entries, and says so once in the log.
	 */
	uint32_t max_sq_depth(bool inline_write, uint32_t max_inline, uint32_t max_send_sge) const;
	/* Likewise for the receive queue (efadv_get_max_rq_depth, else max_rq_wr
	 * descriptors shared by max_recv_sge per receive). */
	uint32_t max_rq_depth(uint32_t max_recv_sge) const;

	/* PCI address, when the device sits on a PCI bus (hardware devices). */
	const PciAddr *pci() const { return has_pci_ ? &pci_ : nullptr; }
	/* Link speed in bits per second, from the port's active width and speed. */
	uint64_t link_speed_bps() const;

	/* One line for logs: "efasim0 (software): RDMA read/write, unsolicited write recv, ..." */
	std::string describe() const;

private:
	Device() = default;
	static Result<std::unique_ptr<Device>> open(const Api &api, ibv_device *dev);

	const Api *api_ = nullptr;
	ibv_context *ctx_ = nullptr;
	std::string name_;
	ibv_device_attr attr_{};
	ibv_port_attr port_{};
	efadv_device_attr_cur efa_{};
	ibv_gid gid_{};
	PciAddr pci_{};
	bool has_pci_ = false;
};

} // namespace efa::verbs

#endif
