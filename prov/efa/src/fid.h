/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What every libfabric object of the provider shares.
 *
 * An object is a C++ struct whose first member is the libfabric struct the application
 * holds (fid_fabric, fid_domain, ...), followed by a magic number naming its kind. The C
 * entry points in the fi_ops tables are thin: they check the fid (its fclass, then the
 * magic: a wrong or closed fid gives -FI_EINVAL, not a crash) and call a member.
 *
 * Parents count their children; closing a parent with live children answers -FI_EBUSY.
 * Closed objects are not freed at once: they stay in a small quarantine with their magic
 * cleared and their ops replaced, so closing or using one twice is an error, not a
 * use-after-free.
 */
#ifndef EFA_FID_H
#define EFA_FID_H

#include "fork.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace efa {

enum class Magic : uint64_t {
	Fabric = 0xefa0000000000001,
	Domain,
	Eq,
	Av,
	Mr,
	Cq,
	Cntr,
	Ep,
	RdmEp,
	DgramEp,
	Dead = 0xefadeadefadeadef,
};

/* The header every object starts with (after its libfabric struct). */
struct ObjHeader {
	Magic magic;
	std::atomic<int> children{0};
	uint32_t gen = fork::generation(); /* the process generation it was made in (fork.h) */
};

/*
 * The object behind `f` if it is a live object of type T (T has `static constexpr Magic
 * kMagic`, the libfabric struct first and an ObjHeader `hdr`), else null.
 */
/* The libfabric class of the objects of a kind. */
constexpr size_t fclass_of(Magic m)
{
	switch (m) {
	case Magic::Fabric: return FI_CLASS_FABRIC;
	case Magic::Domain: return FI_CLASS_DOMAIN;
	case Magic::Eq: return FI_CLASS_EQ;
	case Magic::Av: return FI_CLASS_AV;
	case Magic::Mr: return FI_CLASS_MR;
	case Magic::Cq: return FI_CLASS_CQ;
	case Magic::Cntr: return FI_CLASS_CNTR;
	case Magic::Ep:
	case Magic::RdmEp:
	case Magic::DgramEp: return FI_CLASS_EP;
	default: return FI_CLASS_UNSPEC;
	}
}

template <typename T> T *fid_to(fid_t f)
{
	/* The class first: the magic of a smaller object of another class would lie past
	 * its end. */
	if (!f || f->fclass != fclass_of(T::kMagic))
		return nullptr;
	T *o = reinterpret_cast<T *>(f);
	if (o->hdr.magic != T::kMagic)
		return nullptr;
	if (o->hdr.gen != fork_generation()) [[unlikely]] {
		fork::refused(); /* the parent's object, in a fork() child */
		return nullptr;
	}
	return o;
}

/* Retires a closed object: its fid answers -FI_EINVAL from now on; freed later. */
void retire(fid_t f, ObjHeader &hdr, void (*destroy)(void *), void *obj);

template <typename T> void retire(T *o)
{
	retire(reinterpret_cast<fid_t>(o), o->hdr, [](void *p) { delete static_cast<T *>(p); }, o);
}

/* Operations the provider does not offer. */
int no_bind(fid_t, fid_t, uint64_t);
int no_control(fid_t, int, void *);
int no_ops_open(fid_t, const char *, uint64_t, void **, void *);

} // namespace efa

#endif
