/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Memory registration (fi_mr(3)): reg, regv, regattr, close; fi_mr_key / fi_mr_desc
 * come from the fid_mr fields. The key is the device rkey (FI_MR_PROV_KEY, 4 bytes);
 * remote addresses are virtual addresses (FI_MR_VIRT_ADDR).
 *
 * Access: local writes (receives, RDMA read targets) always allowed; FI_REMOTE_READ and
 * FI_REMOTE_WRITE become the device's remote access. On efa-direct a device that cannot
 * serve them refuses them (-FI_EOPNOTSUPP); on the efa fabric the protocol emulates
 * RMA, so the access is recorded for its checks and the device gets what it has.
 *
 * Keys: the device rkey when the domain's mr_mode has FI_MR_PROV_KEY (or is
 * FI_MR_BASIC); otherwise (the efa fabric without RMA) the key the application
 * requested, unique in the domain (-FI_ENOKEY if taken). The efa fabric's domains keep
 * a key -> MR map for emulated RMA.
 */
#include "domain.h"

#include "log.h"

#include <cstring>

namespace efa {

namespace {

constexpr uint64_t kAccess = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

int mr_close(fid_t f)
{
	Mr *m = fid_to<Mr>(f);
	if (!m)
		return -FI_EINVAL;
	if (int ret = m->vmr.reset())
		return -ret;
	{
		std::lock_guard<std::mutex> g(m->dom->lock);
		for (MrMirror *x : m->dom->mr_mirrors)
			x->mirror_dereg(*m);
		m->dom->mr_keys.erase(m->mr.key);
	}
	m->dom->hdr.children--;
	retire(m);
	return 0;
}

int mr_control(fid_t f, int command, void *)
{
	if (!fid_to<Mr>(f))
		return -FI_EINVAL;
	/* FI_MR_ENDPOINT is not required: nothing to bind or enable. */
	return command == FI_ENABLE ? 0 : -FI_ENOSYS;
}

fi_ops g_mr_fi_ops = {
	.size = sizeof(fi_ops),
	.close = mr_close,
	.bind = no_bind,
	.control = mr_control,
	.ops_open = no_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

int do_reg(Domain *d, const void *buf, size_t len, uint64_t access, uint64_t offset, uint64_t requested_key,
	   uint64_t flags, void *context, fid_mr **out)
{
	if (!out || !buf || !len) {
		EFA_WARN(Mr, "fi_mr_reg: register at least one byte of memory (buf %p, len %zu) and pass a place for the "
			 "MR", buf, len);
		return -FI_EINVAL;
	}
	if (access & ~kAccess) {
		EFA_WARN(Mr, "fi_mr_reg: access %#lx has bits that are no access flags (FI_SEND, FI_RECV, FI_READ, "
			 "FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE)", (unsigned long)(access & ~kAccess));
		return -FI_EINVAL;
	}
	if (flags & ~uint64_t(FI_RMA_EVENT)) {
		EFA_WARN(Mr, "fi_mr_reg: flags %#lx are not supported (only FI_RMA_EVENT); pass 0", (unsigned long)flags);
		return -FI_EINVAL;
	}
	(void)offset; /* FI_MR_VIRT_ADDR: remote addresses are virtual addresses, offset unused */
	if (!access)
		access = FI_SEND | FI_RECV;
	int ibv = verbs::kLocalWrite;
	if (access & FI_REMOTE_READ) {
		if (!d->dev->rdma_read() && !d->rdm) {
			EFA_WARN(Mr, "%s has no RDMA read: FI_REMOTE_READ cannot be granted", d->dev->name().c_str());
			return -FI_EOPNOTSUPP;
		}
		if (d->dev->rdma_read())
			ibv |= verbs::kRemoteRead;
	}
	if (access & FI_REMOTE_WRITE) {
		if (!d->dev->rdma_write() && !d->rdm) {
			EFA_WARN(Mr, "%s has no RDMA write: FI_REMOTE_WRITE cannot be granted", d->dev->name().c_str());
			return -FI_EOPNOTSUPP;
		}
		if (d->dev->rdma_write())
			ibv |= verbs::kRemoteWrite;
	}
	const bool prov_key = (d->mr_mode & FI_MR_PROV_KEY) || d->mr_mode == FI_MR_BASIC;
	if (!prov_key) {
		std::lock_guard<std::mutex> g(d->lock);
		if (d->mr_keys.count(requested_key)) {
			EFA_WARN(Mr, "fi_mr_reg: key %#lx is in use in this domain", (unsigned long)requested_key);
			return -FI_ENOKEY;
		}
	}
	auto vmr = verbs::Mr::reg(d->pd, const_cast<void *>(buf), len, ibv);
	if (!vmr.ok())
		return vmr.error();
	auto *m = new Mr();
	m->hdr.magic = Mr::kMagic;
	m->mr.fid.fclass = FI_CLASS_MR;
	m->mr.fid.context = context;
	m->mr.fid.ops = &g_mr_fi_ops;
	m->dom = d;
	m->vmr = vmr.take();
	m->access = access;
	m->addr = reinterpret_cast<uintptr_t>(buf);
	m->len = len;
	m->mr.mem_desc = m;
	m->mr.key = prov_key ? m->vmr.rkey() : requested_key;
	if (d->rdm) {
		std::lock_guard<std::mutex> g(d->lock);
		for (size_t i = 0; i < d->mr_mirrors.size(); i++) {
			if (int r = d->mr_mirrors[i]->mirror_reg(*m)) {
				while (i--)
					d->mr_mirrors[i]->mirror_dereg(*m);
				delete m; /* its verbs::Mr deregisters */
				return r;
			}
		}
		d->mr_keys[m->mr.key] = m;
	}
	d->hdr.children++;
	*out = &m->mr;
	return 0;
}

int mr_reg(fid_t f, const void *buf, size_t len, uint64_t access, uint64_t offset, uint64_t requested_key,
	   uint64_t flags, fid_mr **mr, void *context)
{
	Domain *d = fid_to<Domain>(f);
	if (!d)
		return -FI_EINVAL;
	return do_reg(d, buf, len, access, offset, requested_key, flags, context, mr);
}

int mr_regv(fid_t f, const iovec *iov, size_t count, uint64_t access, uint64_t offset, uint64_t requested_key,
	    uint64_t flags, fid_mr **mr, void *context)
{
	if (count > 1) {
		EFA_WARN(Mr, "fi_mr_regv: %zu iovs, mr_iov_limit is 1", count);
		return -FI_EINVAL;
	}
	return mr_reg(f, count ? iov[0].iov_base : nullptr, count ? iov[0].iov_len : 0, access, offset, requested_key,
		      flags, mr, context);
}

int mr_regattr(fid_t f, const fi_mr_attr *attr, uint64_t flags, fid_mr **mr)
{
	if (!attr) {
		EFA_WARN(Mr, "fi_mr_regattr: pass a struct fi_mr_attr");
		return -FI_EINVAL;
	}
	if (attr->iface != FI_HMEM_SYSTEM) {
		EFA_WARN(Mr, "fi_mr_regattr: device memory (iface %d) is not supported", int(attr->iface));
		return -FI_EOPNOTSUPP;
	}
	return mr_regv(f, attr->mr_iov, attr->iov_count, attr->access, attr->offset, attr->requested_key, flags, mr,
		       attr->context);
}

} // namespace

fi_ops_mr g_mr_ops = {
	.size = sizeof(fi_ops_mr),
	.reg = mr_reg,
	.regv = mr_regv,
	.regattr = mr_regattr,
};

} // namespace efa
