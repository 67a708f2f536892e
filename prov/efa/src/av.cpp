/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Address vector operations (fi_av(3)). */
#include "av.h"

#include "log.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace efa {

namespace {

uint64_t rkey_of(uint16_t ahn, uint32_t qpn) { return uint64_t(ahn) << 32 | qpn; }

int av_close(fid_t f)
{
	Av *av = fid_to<Av>(f);
	if (!av)
		return -FI_EINVAL;
	if (av->hdr.children.load())
		return -FI_EBUSY;
	const size_t n = av->count.load();
	for (size_t i = 0; i < n; i++) {
		AvEntry &e = av->chunks[i / Av::kChunk].load()[i % Av::kChunk];
		if (e.ah)
			av->dom->put_ah(e.ah);
		e.ah = nullptr;
	}
	for (auto &c : av->chunks)
		delete[] c.exchange(nullptr);
	if (av->eq)
		av->eq->hdr.children--;
	av->dom->hdr.children--;
	retire(av);
	return 0;
}

int av_bind(fid_t f, fid_t bf, uint64_t flags)
{
	Av *av = fid_to<Av>(f);
	Eq *eq = bf ? fid_to<Eq>(bf) : nullptr;
	if (!av || !eq || flags)
		return -FI_EINVAL;
	if (!(av->flags & FI_EVENT)) {
		EFA_WARN(Av, "fi_av_bind: an EQ is only used by an AV opened with FI_EVENT");
		return -FI_EINVAL;
	}
	if (av->eq)
		return -FI_EBUSY;
	av->eq = eq;
	eq->hdr.children++;
	return 0;
}

/* Inserts one address under av->lock. Returns the fi_addr or a negative error. */
int64_t insert_one(Av *av, const RawAddr &addr)
{
	const size_t idx = av->count.load(std::memory_order_relaxed);
	if (idx >= Av::kChunk * Av::kMaxChunks)
		return -FI_ENOSPC;
	if (!addr.qpn) {
		EFA_WARN(Av, "address %s: QP number 0 is never an endpoint", addr_to_string(addr).c_str());
		return -FI_EINVAL;
	}
	int err = 0;
	Domain::AhRef *ah = av->dom->get_ah(addr.gid, &err);
	if (!ah) {
		EFA_WARN(Av, "address %s: cannot create an address handle: %s", addr_to_string(addr).c_str(),
			 fi_strerror(-err));
		return err ? err : -FI_EINVAL;
	}
	AvEntry *chunk = av->chunks[idx / Av::kChunk].load(std::memory_order_relaxed);
	if (!chunk) {
		chunk = new AvEntry[Av::kChunk]();
		av->chunks[idx / Av::kChunk].store(chunk, std::memory_order_release);
	}
	AvEntry &e = chunk[idx % Av::kChunk];
	e.addr = addr;
	e.ah = ah;
	e.valid.store(true, std::memory_order_release);
	av->reverse[rkey_of(ah->ah.ahn(), addr.qpn)] = idx;
	av->count.store(idx + 1, std::memory_order_release);
	for (AvNotice *n : av->listeners)
		n->inserted.store(true, std::memory_order_release);
	return int64_t(idx);
}

int av_insert(fid_av *f, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	Av *av = fid_to<Av>(&f->fid);
	if (!av)
		return -FI_EINVAL;
	if ((count && !addr) || (flags & ~uint64_t(FI_MORE | FI_SYNC_ERR))) {
		EFA_WARN(Av, "fi_av_insert: pass %zu addresses from fi_getname and flags 0, FI_MORE or FI_SYNC_ERR (got %s, "
			 "%#lx)", count, addr ? "addresses" : "NULL", (unsigned long)flags);
		return -FI_EINVAL;
	}
	const bool async = av->eq && !(flags & FI_SYNC_ERR);
	int *errors = (flags & FI_SYNC_ERR) ? static_cast<int *>(context) : nullptr;
	int inserted = 0;
	{
		std::lock_guard<std::mutex> g(av->lock);
		for (size_t i = 0; i < count; i++) {
			RawAddr a;
			std::memcpy(&a, static_cast<const uint8_t *>(addr) + i * kAddrLen, kAddrLen);
			int64_t r = insert_one(av, a);
			if (fi_addr)
				fi_addr[i] = r >= 0 ? fi_addr_t(r) : FI_ADDR_NOTAVAIL;
			if (errors)
				errors[i] = r >= 0 ? 0 : int(-r);
			if (r >= 0)
				inserted++;
			else if (async)
				av->eq->push_error(&av->av.fid, context, i, int(-r), 0, "address could not be inserted");
		}
	}
	if (async) {
		fi_eq_entry e{&av->av.fid, context, uint64_t(inserted)};
		av->eq->push(FI_AV_COMPLETE, &e, sizeof e);
		return 0;
	}
	return inserted;
}

int av_insertsvc(fid_av *f, const char *node, const char *service, fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	RawAddr a;
	if (!node || !service || !addr_from_node_service(node, service, a)) {
		EFA_WARN(Av, "fi_av_insertsvc: node must be a GID in IPv6 text and service '<qpn>:<qkey>' (got '%s', '%s')",
			 node ? node : "", service ? service : "");
		return -FI_EINVAL;
	}
	return av_insert(f, &a, 1, fi_addr, flags, context);
}

int av_insertsym(fid_av *, const char *, size_t, const char *, size_t, fi_addr_t *, uint64_t, void *)
{
	return -FI_ENOSYS;
}

int av_remove(fid_av *f, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	Av *av = fid_to<Av>(&f->fid);
	if (!av || (count && !fi_addr) || flags)
		return -FI_EINVAL;
	std::lock_guard<std::mutex> g(av->lock);
	int ret = 0;
	for (size_t i = 0; i < count; i++) {
		const fi_addr_t a = fi_addr[i];
		if (a >= av->count.load()) {
			ret = -FI_EINVAL;
			continue;
		}
		AvEntry &e = av->chunks[a / Av::kChunk].load()[a % Av::kChunk];
		if (!e.valid.load()) {
			ret = -FI_EINVAL;
			continue;
		}
		/* Later sends to `a` fail; traffic in flight to it is dropped by QKEY if the
		 * QP number is reused by a new endpoint. */
		e.valid.store(false, std::memory_order_release);
		auto it = av->reverse.find(rkey_of(e.ah->ah.ahn(), e.addr.qpn));
		if (it != av->reverse.end() && it->second == a)
			av->reverse.erase(it);
		av->dom->put_ah(e.ah);
		e.ah = nullptr;
		/* Endpoints of the efa fabric release their state of the peer at their next
		 * progress or operation (rdm/liveness.cpp). */
		for (AvNotice *n : av->listeners)
			n->removed.store(true, std::memory_order_release);
	}
	return ret;
}

int av_lookup(fid_av *f, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	Av *av = fid_to<Av>(&f->fid);
	if (!av || !addrlen)
		return -FI_EINVAL;
	const AvEntry *e = av->lookup(fi_addr);
	if (!e)
		return -FI_ENOENT;
	if (addr)
		std::memcpy(addr, &e->addr, std::min(*addrlen, kAddrLen));
	*addrlen = kAddrLen;
	return 0;
}

const char *av_straddr(fid_av *, const void *addr, char *buf, size_t *len)
{
	if (!addr || !buf || !len)
		return nullptr;
	RawAddr a;
	std::memcpy(&a, addr, kAddrLen);
	std::string s = addr_to_string(a);
	if (*len) {
		size_t n = std::min(*len - 1, s.size());
		std::memcpy(buf, s.data(), n);
		buf[n] = 0;
	}
	*len = s.size() + 1;
	return buf;
}

int no_av_set(fid_av *, fi_av_set_attr *, fid_av_set **, void *) { return -FI_ENOSYS; }

fi_ops g_av_fi_ops = {
	.size = sizeof(fi_ops),
	.close = av_close,
	.bind = av_bind,
	.control = no_control,
	.ops_open = no_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

fi_ops_av g_av_ops = {
	.size = sizeof(fi_ops_av),
	.insert = av_insert,
	.insertsvc = av_insertsvc,
	.insertsym = av_insertsym,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
	.av_set = no_av_set,
};

} // namespace

void Av::warn_unknown(fi_addr_t addr)
{
	static std::atomic<bool> warned{false};
	if (!warned.exchange(true))
		EFA_WARN(Av, "an operation names fi_addr %lu, which is not in the endpoint's address vector (never "
			 "inserted, or removed): insert the peer's address with fi_av_insert and use the fi_addr it "
			 "returns; the operation fails with -FI_EINVAL (further ones are not logged)",
			 (unsigned long)addr);
	else
		EFA_DBG(Av, "fi_addr %lu is not in the address vector", (unsigned long)addr);
}

void Av::listen(AvNotice *n)
{
	std::lock_guard<std::mutex> g(lock);
	listeners.push_back(n);
}

void Av::unlisten(AvNotice *n)
{
	std::lock_guard<std::mutex> g(lock);
	listeners.erase(std::remove(listeners.begin(), listeners.end(), n), listeners.end());
}

fi_addr_t Av::reverse_lookup(uint16_t ahn, uint32_t qpn)
{
	std::lock_guard<std::mutex> g(lock);
	auto it = reverse.find(rkey_of(ahn, qpn));
	return it == reverse.end() ? FI_ADDR_NOTAVAIL : it->second;
}

int av_open(fid_domain *df, fi_av_attr *attr, fid_av **out, void *context)
{
	Domain *d = fid_to<Domain>(&df->fid);
	if (!d)
		return -FI_EINVAL;
	if (!attr || !out) {
		EFA_WARN(Av, "fi_av_open: pass a struct fi_av_attr (type FI_AV_TABLE or FI_AV_MAP) and a place for the AV");
		return -FI_EINVAL;
	}
	if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_TABLE && attr->type != FI_AV_MAP)
		return -FI_EINVAL;
	if (attr->name || attr->rx_ctx_bits) {
		EFA_WARN(Av, "fi_av_open: named (shared) AVs and rx_ctx_bits are not supported");
		return -FI_ENOSYS;
	}
	if (attr->flags & ~uint64_t(FI_EVENT | FI_SYMMETRIC))
		return -FI_EINVAL;
	auto *av = new Av();
	av->hdr.magic = Av::kMagic;
	av->av.fid.fclass = FI_CLASS_AV;
	av->av.fid.context = context;
	av->av.fid.ops = &g_av_fi_ops;
	av->av.ops = &g_av_ops;
	av->dom = d;
	av->type = attr->type == FI_AV_UNSPEC ? FI_AV_TABLE : attr->type;
	av->flags = attr->flags;
	av->eq = nullptr;
	d->hdr.children++;
	*out = &av->av;
	return 0;
}

} // namespace efa
