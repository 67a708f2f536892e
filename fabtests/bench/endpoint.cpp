/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Opening a provider selection the one way both benchmarks do (endpoint.h). */
#include "endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <cstring>

namespace bench {

void fail_fi(const char *call, long ret)
{
	throw Error(std::string(call) + ": " + fi_strerror(int(ret < 0 ? -ret : ret)) + " (" +
		    std::to_string(ret) + ")");
}

namespace {

bool matches(const fi_info *i, const Selection &s)
{
	if (!s.fabric.empty() && (!i->fabric_attr->name || s.fabric != i->fabric_attr->name))
		return false;
	if (!s.domain.empty() && (!i->domain_attr->name || s.domain != i->domain_attr->name))
		return false;
	return true;
}

} // namespace

std::string Selection::describe() const
{
	return "no " + (fabric.empty() ? std::string() : fabric + " ") + "info from provider " +
	       prov + (domain.empty() ? "" : " on domain " + domain) +
	       ((caps & FI_TAGGED) ? " with FI_TAGGED" : "") +
	       (type == FI_EP_DGRAM ? " for FI_EP_DGRAM" : "");
}

void Endpoint::close()
{
	for (fid_mr *mr : mrs_)
		fi_close(&mr->fid);
	mrs_.clear();
	if (ep_)
		fi_close(&ep_->fid);
	if (av_)
		fi_close(&av_->fid);
	if (cq_)
		fi_close(&cq_->fid);
	if (domain_)
		fi_close(&domain_->fid);
	if (fabric_)
		fi_close(&fabric_->fid);
	if (info_)
		fi_freeinfo(info_);
	ep_ = nullptr;
	av_ = nullptr;
	cq_ = nullptr;
	domain_ = nullptr;
	fabric_ = nullptr;
	info_ = nullptr;
}

void Endpoint::open(const Selection &s)
{
	fi_info *hints = fi_allocinfo();
	if (!hints)
		throw Error("fi_allocinfo failed");
	hints->ep_attr->type = s.type;
	hints->caps = s.caps | s.optional_caps;
	hints->mode = s.mode;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_VIRT_ADDR | FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->tx_attr->msg_order = 0; /* neither program depends on ordering */
	hints->rx_attr->msg_order = 0;
	hints->fabric_attr->prov_name = strdup(s.prov.c_str());
	if (!s.fabric.empty())
		hints->fabric_attr->name = strdup(s.fabric.c_str());

	const uint32_t version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
	fi_info *list = nullptr;
	int ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &list);
	if (ret == -FI_ENODATA && s.optional_caps) {
		hints->caps &= ~s.optional_caps;
		ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &list);
	}
	fi_freeinfo(hints);
	if (ret == -FI_ENODATA)
		throw Error(s.describe(), true);
	if (ret)
		fail_fi("fi_getinfo", ret);
	for (fi_info *i = list; i; i = i->next)
		if (matches(i, s)) {
			info_ = fi_dupinfo(i);
			break;
		}
	fi_freeinfo(list);
	if (!info_)
		throw Error(s.describe(), true);

	if ((ret = fi_fabric(info_->fabric_attr, &fabric_, nullptr)))
		fail_fi("fi_fabric", ret);
	if ((ret = fi_domain(fabric_, info_, &domain_, nullptr)))
		fail_fi("fi_domain", ret);
	fi_cq_attr cq_attr{};
	cq_attr.format = s.cq_format;
	cq_attr.wait_obj = FI_WAIT_NONE;
	const size_t tx = info_->tx_attr->size, rx = info_->rx_attr->size;
	cq_attr.size = s.cq_size ? s.cq_size : tx && rx ? tx + rx : 0;
	if ((ret = fi_cq_open(domain_, &cq_attr, &cq_, nullptr)))
		fail_fi("fi_cq_open", ret);
	fi_av_attr av_attr{};
	av_attr.type = info_->domain_attr->av_type;
	av_attr.count = s.av_count;
	if ((ret = fi_av_open(domain_, &av_attr, &av_, nullptr)))
		fail_fi("fi_av_open", ret);
	if ((ret = fi_endpoint(domain_, info_, &ep_, nullptr)))
		fail_fi("fi_endpoint", ret);
	if ((ret = fi_ep_bind(ep_, &av_->fid, 0)))
		fail_fi("fi_ep_bind(av)", ret);
	if ((ret = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV)))
		fail_fi("fi_ep_bind(cq)", ret);
	if ((ret = fi_enable(ep_)))
		fail_fi("fi_enable", ret);
}

fid_mr *Endpoint::reg(void *buf, size_t len, uint64_t access)
{
	fid_mr *mr = nullptr;
	int ret = fi_mr_reg(domain_, buf, len, access, 0, next_key_++, 0, &mr, nullptr);
	if (ret)
		fail_fi("fi_mr_reg", ret);
	mrs_.push_back(mr);
	if (mr_mode() & FI_MR_ENDPOINT) {
		if ((ret = fi_mr_bind(mr, &ep_->fid, 0)))
			fail_fi("fi_mr_bind", ret);
		if ((ret = fi_mr_enable(mr)))
			fail_fi("fi_mr_enable", ret);
	}
	if (fi_mr_key(mr) == FI_KEY_NOTAVAIL)
		throw Error("fi_mr_key: key not available (FI_MR_RAW is not supported)");
	return mr;
}

std::vector<uint8_t> Endpoint::name() const
{
	std::vector<uint8_t> buf(256);
	size_t len = buf.size();
	int ret = fi_getname(&ep_->fid, buf.data(), &len);
	if (ret == -FI_ETOOSMALL && len > buf.size()) { /* a provider with longer names */
		buf.resize(len);
		ret = fi_getname(&ep_->fid, buf.data(), &len);
	}
	if (ret)
		fail_fi("fi_getname", ret);
	buf.resize(len);
	return buf;
}

fi_addr_t Endpoint::insert(const void *name) const
{
	fi_addr_t addr = FI_ADDR_NOTAVAIL;
	int ret = fi_av_insert(av_, name, 1, &addr, 0, nullptr);
	if (ret != 1)
		fail_fi("fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
	return addr;
}

uint64_t Endpoint::remote_addr(const void *buf) const
{
	return (mr_mode() & FI_MR_VIRT_ADDR) ? uint64_t(reinterpret_cast<uintptr_t>(buf)) : 0;
}

} // namespace bench
