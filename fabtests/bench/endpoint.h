/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The one way the benchmarks (fi_efa_bench, fi_efa_soak) open a provider: fi_getinfo with
 * the caller's hints, the first answer on the asked fabric and domain, a fabric, a domain,
 * one CQ for both directions, an AV and an enabled endpoint; and registration with every
 * mr_mode bit either program may meet (FI_MR_ENDPOINT binding, FI_MR_PROV_KEY keys).
 * Failures throw bench::Error; each program decides what a failure does.
 */
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

/* A failure of this run; `unavailable` marks "no matching provider info". */
struct Error : std::runtime_error {
	explicit Error(const std::string &what, bool unavailable = false, bool peer_gone = false)
		: std::runtime_error(what), unavailable(unavailable), peer_gone(peer_gone) {}
	bool unavailable;
	bool peer_gone;
};
[[noreturn]] void fail_fi(const char *call, long ret);

struct Selection {
	std::string prov;   /* fabric_attr->prov_name */
	std::string fabric; /* asked for, and required of the answer; empty: any */
	std::string domain; /* required of the answer; empty: any */
	fi_ep_type type = FI_EP_RDM;
	uint64_t caps = 0;
	uint64_t optional_caps = 0; /* asked for too; dropped when no info has them */
	uint64_t mode = FI_CONTEXT | FI_CONTEXT2;
	fi_cq_format cq_format = FI_CQ_FORMAT_MSG;
	size_t cq_size = 0; /* 0: the endpoint's tx size + rx size */
	size_t av_count = 2;
	std::string describe() const; /* "info from provider P on domain D with ..." */
};

class Endpoint {
public:
	Endpoint() = default;
	~Endpoint() { close(); }
	Endpoint(const Endpoint &) = delete;
	Endpoint &operator=(const Endpoint &) = delete;

	/* fi_getinfo .. fi_enable. */
	void open(const Selection &s);
	/* Closes everything opened, registrations first (before their memory goes). */
	void close();
	/* fi_mr_reg (then fi_mr_bind and fi_mr_enable under FI_MR_ENDPOINT); the region is
	 * closed with the endpoint. */
	fid_mr *reg(void *buf, size_t len, uint64_t access);
	std::vector<uint8_t> name() const;
	fi_addr_t insert(const void *name) const;
	/* What a peer passes as the remote address of buf (0 without FI_MR_VIRT_ADDR). */
	uint64_t remote_addr(const void *buf) const;

	const fi_info *info() const { return info_; }
	uint64_t mr_mode() const { return info_->domain_attr->mr_mode; }
	fid_domain *domain() const { return domain_; }
	fid_cq *cq() const { return cq_; }
	fid_ep *ep() const { return ep_; }

private:
	fi_info *info_ = nullptr;
	fid_fabric *fabric_ = nullptr;
	fid_domain *domain_ = nullptr;
	fid_cq *cq_ = nullptr;
	fid_av *av_ = nullptr;
	fid_ep *ep_ = nullptr;
	std::vector<fid_mr *> mrs_;
	uint64_t next_key_ = 1;
};

} // namespace bench
