/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fi_getinfo with the tests' hints, and the fabric, domain and address vector every test
 * opens. The hints are those an efa-direct application gives: FI_EP_RDM, FI_CONTEXT and
 * FI_CONTEXT2 (every operation gets a struct fi_context2), FI_RX_CQ_DATA, and mr_mode
 * LOCAL | ALLOCATED | PROV_KEY | VIRT_ADDR (never FI_MR_ENDPOINT), so the tests run on
 * any provider that accepts a subset of those modes. A program that sets
 * opts.ep_type = FI_EP_DGRAM asks for datagram endpoints and accepts FI_MSG_PREFIX too.
 */
#pragma once

#include "ft.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace ft {

class Oob;

/* Owns one fid and closes it (checking the result) when it goes. Children are closed
 * before parents by declaring them after their parents. */
template <typename T> class Fid {
public:
	explicit Fid(const char *what) : what_(what) {}
	~Fid() { close(); }
	Fid(const Fid &) = delete;
	Fid &operator=(const Fid &) = delete;

	T **out() { return &p_; }
	T *get() const { return p_; }
	operator T *() const { return p_; }
	T *operator->() const { return p_; }

	void close()
	{
		if (!p_)
			return;
		int rc = fi_close(&p_->fid);
		p_ = nullptr;
		if (rc)
			FT_FAIL("fi_close(%s) returned %d (%s)", what_, rc, fi_strerror(-rc));
	}

private:
	T *p_ = nullptr;
	const char *what_;
};

struct InfoDeleter {
	void operator()(fi_info *i) const { fi_freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

class Fabric {
public:
	/*
	 * `caps` are required: when the provider offers endpoints but not with these caps,
	 * the test is skipped (exit 77) saying so; when it offers nothing, the test fails.
	 * `optional` caps are asked for one at a time and kept when granted; tests check
	 * has() and say what they leave out.
	 */
	explicit Fabric(uint64_t caps, uint64_t optional = 0);

	fi_info *info() const { return info_.get(); }
	fid_fabric *fabric() const { return fabric_; }
	fid_domain *domain() const { return domain_; }
	fid_av *av() const { return av_; }

	bool has(uint64_t caps) const { return (info_->caps & caps) == caps; }
	const char *prov_name() const { return info_->fabric_attr->prov_name; }
	/* Our efa provider, whose documented behaviour the programs enforce (fi_efa(7)).
	 * Upstream's efa provider (EFA_FT_UPSTREAM=1, contrib/libfabric2.sh) is treated
	 * as any other provider: its deviations are tolerated and listed. */
	bool is_efa() const;
	bool is_upstream_efa() const;
	/* The provider as the KNOWN DEVIATION tables name it: "efa (upstream)" or prov_name(). */
	const char *prov_label() const { return is_upstream_efa() ? "efa (upstream)" : prov_name(); }
	/* With interop() FI_MR_LOCAL is added: the program then passes descriptors
	 * everywhere, as it does for a provider that requires them, so that both processes
	 * take the same steps. */
	uint64_t mr_mode() const { return uint64_t(info_->domain_attr->mr_mode) | (interop() ? FI_MR_LOCAL : 0); }
	bool virt_addr() const { return mr_mode() & FI_MR_VIRT_ADDR; }
	bool rx_cq_data() const { return info_->mode & FI_RX_CQ_DATA; }
	size_t inject_size() const { return std::min<size_t>(info_->tx_attr->inject_size, inject_cap_); }
	size_t max_msg_size() const { return info_->ep_attr->max_msg_size; }
	size_t tx_iov_limit() const { return info_->tx_attr->iov_limit; }
	size_t rx_iov_limit() const { return info_->rx_attr->iov_limit; }
	size_t cq_data_size() const { return std::min<size_t>(info_->domain_attr->cq_data_size, cq_data_cap_); }
	/* The limits a pair on two providers shares: each side sends its own inject size and
	 * CQ data size and takes the smaller of both (also harmless on one provider), and
	 * which provider it runs (peer_upstream_efa, peer_efa). */
	void agree(Oob &ctl);
	bool peer_upstream_efa() const { return peer_upstream_; }
	bool peer_efa() const { return peer_ours_; }
	/* Bytes every send and receive buffer starts with under FI_MSG_PREFIX, else 0. */
	size_t msg_prefix() const
	{
		return ((info_->mode | info_->tx_attr->mode) & FI_MSG_PREFIX) ? info_->ep_attr->msg_prefix_size : 0;
	}
	/* Remote CQ data value fitting cq_data_size bytes. */
	uint64_t cq_data(uint64_t v) const;
	/* Access flags a local buffer is registered with, from the caps. */
	uint64_t local_access() const;

	/* Inserts one address into the AV; returns its fi_addr_t. */
	fi_addr_t insert(const std::vector<uint8_t> &name) const;
	/* Removes one. */
	void remove(fi_addr_t addr) const;

private:
	size_t inject_cap_ = SIZE_MAX;
	size_t cq_data_cap_ = SIZE_MAX;
	bool peer_upstream_ = false, peer_ours_ = false;
	InfoPtr info_;
	Fid<fid_fabric> fabric_{"fabric"};
	Fid<fid_domain> domain_{"domain"};
	Fid<fid_av> av_{"av"};
};

/*
 * A check a provider is known to fail in a way the test cannot survive (the connection
 * torn down, a hang, a crash): true, after printing "KNOWN DEVIATION (<provider>):
 * <check> not run", when fab's provider (prov_label()) is listed for `check` in
 * ft_fabric.cpp's table. The check then is left out there; on our efa (never listed)
 * it always runs.
 */
bool known_broken(const Fabric &fab, const char *check);

} // namespace ft
