/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "domain.h"

#include "fork.h"

#include "av.h"
#include "cntr.h"
#include "cq.h"
#include "dgram/ep.h"
#include "direct/ep.h"
#include "rdm/entry.h"
#include "info.h"
#include "log.h"
#include "params.h"
#include "prov.h"
#include "tclass.h"

#include <cstring>

namespace efa {

namespace {

int domain_close(fid_t f)
{
	Domain *d = fid_to<Domain>(f);
	if (!d)
		return -FI_EINVAL;
	if (int n = d->hdr.children.load()) {
		EFA_WARN(Domain, "fi_close(domain): %d endpoints, CQs, AVs, counters or MRs are still open; close them first",
			 n);
		return -FI_EBUSY;
	}
	{
		std::lock_guard<std::mutex> g(d->lock);
		d->ahs.clear();
	}
	if (d->mr_cache) {
		const MrCacheStats s = d->mr_cache->stats();
		EFA_INFO(Mr, "%s: registration cache: %lu hits, %lu misses, %lu uncached, %lu evicted, %lu invalidated",
			 d->dev->name().c_str(), (unsigned long)s.hits, (unsigned long)s.misses, (unsigned long)s.uncached,
			 (unsigned long)s.evictions, (unsigned long)s.invalidations);
		d->mr_cache.reset();
	}
	if (int ret = d->pd.reset())
		EFA_WARN(Domain, "%s: closing the protection domain: %s", d->dev->name().c_str(), strerror(ret));
	fi_freeinfo(d->info);
	d->info = nullptr;
	d->fabric->hdr.children--;
	retire(d);
	return 0;
}

int domain_ops_open(fid_t f, const char *name, uint64_t, void **, void *)
{
	if (!fid_to<Domain>(f))
		return -FI_EINVAL;
	EFA_DBG(Domain, "fi_open_ops('%s'): no such interface", name ? name : "");
	return -FI_ENOSYS;
}

int no_scalable_ep(fid_domain *, fi_info *, fid_ep **, void *) { return -FI_ENOSYS; }
int no_poll_open(fid_domain *, fi_poll_attr *, fid_poll **) { return -FI_ENOSYS; }
int no_stx(fid_domain *, fi_tx_attr *, fid_stx **, void *) { return -FI_ENOSYS; }
int no_srx(fid_domain *, fi_rx_attr *, fid_ep **, void *) { return -FI_ENOSYS; }
/* efa-direct has no atomics; the efa fabric emulates them. */
int domain_query_atomic(fid_domain *df, fi_datatype dt, fi_op op, fi_atomic_attr *attr, uint64_t flags)
{
	Domain *d = fid_to<Domain>(&df->fid);
	if (!d)
		return -FI_EINVAL;
	return d->rdm ? rdm::query_atomic(*d->dev, d->info->caps, dt, op, attr, flags) : -FI_EOPNOTSUPP;
}
int no_query_collective(fid_domain *, fi_collective_op, fi_collective_attr *, uint64_t) { return -FI_ENOSYS; }

fi_ops g_domain_fi_ops = {
	.size = sizeof(fi_ops),
	.close = domain_close,
	.bind = no_bind,
	.control = no_control,
	.ops_open = domain_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

/* The endpoint kind follows the domain's fabric. */
int ep_open_any(fid_domain *df, fi_info *info, fid_ep **ep, void *context)
{
	Domain *d = fid_to<Domain>(&df->fid);
	if (!d)
		return -FI_EINVAL;
	return d->dgram ? dgram::ep_open(df, info, ep, context)
	       : d->rdm ? rdm::ep_open(df, info, ep, context)
			: direct::ep_open(df, info, ep, context);
}

fi_ops_domain g_domain_ops = [] {
	fi_ops_domain o{};
	o.size = sizeof(fi_ops_domain);
	o.av_open = av_open;
	o.cq_open = cq_open;
	o.endpoint = ep_open_any;
	o.scalable_ep = no_scalable_ep;
	o.cntr_open = cntr_open;
	o.poll_open = no_poll_open;
	o.stx_ctx = no_stx;
	o.srx_ctx = no_srx;
	o.query_atomic = domain_query_atomic;
	o.query_collective = no_query_collective;
	return o;
}();

} // namespace

Domain::AhRef *Domain::get_ah(const uint8_t gid[16], int *err)
{
	std::string key(reinterpret_cast<const char *>(gid), 16);
	std::lock_guard<std::mutex> g(lock);
	auto it = ahs.find(key);
	if (it != ahs.end()) {
		it->second->refs++;
		return it->second.get();
	}
	auto ah = verbs::Ah::create(pd, gid);
	if (!ah.ok()) {
		*err = ah.error();
		return nullptr;
	}
	auto ref = std::make_unique<AhRef>(AhRef{ah.take(), 1});
	AhRef *p = ref.get();
	ahs.emplace(std::move(key), std::move(ref));
	return p;
}

void Domain::put_ah(AhRef *ah)
{
	std::lock_guard<std::mutex> g(lock);
	if (--ah->refs)
		return;
	for (auto it = ahs.begin(); it != ahs.end(); ++it) {
		if (it->second.get() == ah) {
			ahs.erase(it);
			return;
		}
	}
}

int domain_open(fid_fabric *f, fi_info *info, fid_domain **out, void *context)
{
	Fabric *fab = fid_to<Fabric>(&f->fid);
	if (!fab)
		return -FI_EINVAL;
	if (!info || !out || !info->domain_attr) {
		EFA_WARN(Domain, "fi_domain: pass an fi_info from fi_getinfo (with its domain_attr) and a place for the domain");
		return -FI_EINVAL;
	}
	std::vector<const verbs::Device *> list;
	for (const auto &d : devices(true))
		list.push_back(d.get());
	bool dgram = false;
	const verbs::Device *dev = device_of(info, list, &dgram);
	if (!dev) {
		EFA_WARN(Domain, "fi_domain: '%s' is not a domain of the efa provider (use an fi_info from fi_getinfo)",
			 info->domain_attr->name ? info->domain_attr->name : "(null)");
		return -FI_EINVAL;
	}
	if (info->fabric_attr && info->fabric_attr->name && fab->name != info->fabric_attr->name) {
		EFA_WARN(Domain, "fi_domain: info is for fabric '%s', not '%s'", info->fabric_attr->name, fab->name.c_str());
		return -FI_EINVAL;
	}
	if (int r = check_tclass(info->domain_attr->tclass, "fi_domain", "domain_attr->tclass"))
		return r;
	if (int r = fork::prepare(dev->api()))
		return r;
	auto pd = verbs::Pd::alloc(*dev);
	if (!pd.ok())
		return pd.error();
	auto *d = new Domain();
	d->hdr.magic = Domain::kMagic;
	d->dom.fid.fclass = FI_CLASS_DOMAIN;
	d->dom.fid.context = context;
	d->dom.fid.ops = &g_domain_fi_ops;
	d->dom.ops = &g_domain_ops;
	d->dom.mr = &g_mr_ops;
	d->fabric = fab;
	d->dev = dev;
	d->pd = pd.take();
	d->info = fi_dupinfo(info);
	d->mr_mode = info->domain_attr->mr_mode;
	d->threading = info->domain_attr->threading;
	d->rx_cq_data = info->mode & FI_RX_CQ_DATA;
	d->dgram = dgram;
	d->rdm = !fab->direct && !dgram;
	if (d->rdm) {
		/* Defaults: 90% of the device's MR limits, as upstream, at most 4096 entries (each
		 * watched range may split a mapping in two: vm.max_map_count is 65530). */
		const Params &prm = params();
		const ibv_device_attr &da = dev->attr();
		const size_t count = prm.mr_max_cached_count != kParamUnset
					     ? prm.mr_max_cached_count
					     : std::min<size_t>(size_t(da.max_mr) / 10 * 9, 4096);
		const size_t bytes = prm.mr_max_cached_size != kParamUnset ? prm.mr_max_cached_size
									   : size_t(da.max_mr_size / 10 * 9);
		d->mr_cache = std::make_unique<MrCache>(d->pd, prm.mr_cache_enable, count, bytes);
		EFA_DBG(Mr, "%s: registration cache: %s, at most %zu entries and %zu bytes", dev->name().c_str(),
			d->mr_cache->monitor(), count, bytes);
	}
	fab->hdr.children++;
	*out = &d->dom;
	return 0;
}

} // namespace efa
