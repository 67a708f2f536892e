/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "verbs/resources.h"

#include "log.h"

#include <cerrno>
#include <cstring>

namespace efa::verbs {

namespace {
int errno_or(int fallback) { return errno ? errno : fallback; }
} // namespace

int release_pd(const Api &api, ibv_pd *p)
{
	int ret = api.dealloc_pd(p);
	if (ret)
		EFA_WARN(Domain, "ibv_dealloc_pd: %s", strerror(ret));
	return ret;
}

int release_mr(const Api &api, ibv_mr *p)
{
	int ret = api.dereg_mr(p);
	if (ret)
		EFA_WARN(Mr, "ibv_dereg_mr: %s", strerror(ret));
	return ret;
}

int release_ah(const Api &api, ibv_ah *p)
{
	int ret = api.destroy_ah(p);
	if (ret)
		EFA_WARN(Av, "ibv_destroy_ah: %s", strerror(ret));
	return ret;
}

int release_channel(const Api &api, ibv_comp_channel *p)
{
	int ret = api.destroy_comp_channel(p);
	if (ret)
		EFA_WARN(Cq, "ibv_destroy_comp_channel: %s", strerror(ret));
	return ret;
}

Result<Pd> Pd::alloc(const Device &dev)
{
	errno = 0;
	ibv_pd *p = dev.api().alloc_pd(dev.ctx());
	if (!p) {
		int err = errno_or(ENOMEM);
		EFA_WARN(Domain, "%s: ibv_alloc_pd: %s", dev.name().c_str(), strerror(err));
		return Err{-err};
	}
	return Pd(&dev.api(), p);
}

Result<Mr> Mr::reg(const Pd &pd, void *addr, size_t len, int access)
{
	const Api &api = pd.api();
	errno = 0;
	ibv_mr *m = api.reg_mr_iova2 ? api.reg_mr_iova2(pd.get(), addr, len, reinterpret_cast<uintptr_t>(addr),
							unsigned(access))
				     : api.reg_mr(pd.get(), addr, len, access);
	if (!m) {
		int err = errno_or(ENOMEM);
		if (err == ENOMEM || err == EFAULT)
			EFA_WARN(Mr,
				 "cannot register %zu bytes at %p: %s; either the device's registrations are "
				 "used up (max_mr): close MRs you no longer need, or the locked-memory limit "
				 "is reached: raise it (ulimit -l unlimited, or memlock in /etc/security/limits.conf)",
				 len, addr, strerror(err));
		else
			EFA_WARN(Mr, "cannot register %zu bytes at %p (access %#x): %s", len, addr, access, strerror(err));
		return Err{-err};
	}
	return Mr(&api, m);
}

Result<Ah> Ah::create(const Pd &pd, const ibv_gid &gid)
{
	const Api &api = pd.api();
	ibv_ah_attr attr{};
	attr.is_global = 1;
	attr.port_num = 1;
	attr.grh.dgid = gid;
	errno = 0;
	ibv_ah *ah = api.create_ah(pd.get(), &attr);
	if (!ah) {
		int err = errno_or(EINVAL);
		EFA_WARN(Av, "ibv_create_ah: %s", strerror(err));
		return Err{-err};
	}
	efadv_ah_attr ea{};
	int ret = api.efadv_query_ah(ah, &ea, sizeof ea);
	if (ret) {
		EFA_WARN(Av, "efadv_query_ah: %s", strerror(ret));
		api.destroy_ah(ah);
		return Err{-ret};
	}
	return Ah(&api, ah, ea.ahn);
}

Result<CompChannel> CompChannel::create(const Device &dev)
{
	errno = 0;
	ibv_comp_channel *ch = dev.api().create_comp_channel(dev.ctx());
	if (!ch) {
		int err = errno_or(ENOMEM);
		EFA_WARN(Cq, "ibv_create_comp_channel: %s", strerror(err));
		return Err{-err};
	}
	return CompChannel(&dev.api(), ch);
}

} // namespace efa::verbs
