/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "fabric.h"

#include "domain.h"
#include "cq.h"
#include "info.h"
#include "log.h"

#include <cstring>

namespace efa {

namespace {

int fabric_close(fid_t f)
{
	Fabric *fab = fid_to<Fabric>(f);
	if (!fab)
		return -FI_EINVAL;
	if (int n = fab->hdr.children.load()) {
		EFA_WARN(Fabric, "fi_close(fabric): %d domains or EQs are still open; close them first", n);
		return -FI_EBUSY;
	}
	retire(fab);
	return 0;
}

/*
 * fi_trywait: 0 when every object is armed and empty (the caller may block on its wait
 * fd), -FI_EAGAIN when one has something to read.
 */
int fabric_trywait(fid_fabric *f, fid **fids, int count)
{
	if (!fid_to<Fabric>(&f->fid) || (count && !fids))
		return -FI_EINVAL;
	for (int i = 0; i < count; i++) {
		if (!fids[i])
			return -FI_EINVAL;
		if (fids[i]->fclass == FI_CLASS_CQ) {
			Cq *cq = fid_to<Cq>(fids[i]);
			if (!cq)
				return -FI_EINVAL;
			if (int ret = cq->trywait())
				return ret;
		} else if (fids[i]->fclass != FI_CLASS_EQ) {
			return -FI_ENOSYS;
		}
	}
	return 0;
}

int no_passive_ep(fid_fabric *, fi_info *, fid_pep **, void *) { return -FI_ENOSYS; }
int no_wait_open(fid_fabric *, fi_wait_attr *, fid_wait **) { return -FI_ENOSYS; }

fi_ops g_fabric_fi_ops = {
	.size = sizeof(fi_ops),
	.close = fabric_close,
	.bind = no_bind,
	.control = no_control,
	.ops_open = no_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

fi_ops_fabric g_fabric_ops = [] {
	fi_ops_fabric o{};
	o.size = sizeof(fi_ops_fabric);
	o.domain = domain_open;
	o.passive_ep = no_passive_ep;
	o.eq_open = eq_open;
	o.wait_open = no_wait_open;
	o.trywait = fabric_trywait;
	return o;
}();

} // namespace

int fabric_open(fi_fabric_attr *attr, fid_fabric **out, void *context)
{
	if (!attr || !out) {
		EFA_WARN(Fabric, "fi_fabric: pass the fabric_attr of an fi_info from fi_getinfo and a place for the fabric");
		return -FI_EINVAL;
	}
	const char *name = attr->name ? attr->name : kDirectFabric;
	const bool direct = !strcmp(name, kDirectFabric);
	if (!direct && strcmp(name, kRdmFabric)) {
		EFA_WARN(Fabric, "unknown fabric '%s' (the efa provider has '%s' and '%s')", name, kDirectFabric,
			 kRdmFabric);
		return -FI_EINVAL;
	}
	auto *fab = new Fabric();
	fab->hdr.magic = Fabric::kMagic;
	fab->fab.fid.fclass = FI_CLASS_FABRIC;
	fab->fab.fid.context = context;
	fab->fab.fid.ops = &g_fabric_fi_ops;
	fab->fab.ops = &g_fabric_ops;
	fab->fab.api_version = attr->api_version;
	fab->name = name;
	fab->direct = direct;
	*out = &fab->fab;
	return 0;
}

} // namespace efa
