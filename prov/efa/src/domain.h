/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Domain (one EFA device and its protection domain) and memory regions.
 *
 * Address handles are shared per GID within a domain and reference counted: every AV
 * entry for any QP on a remote device uses one AH, as the hardware has a limited number.
 */
#ifndef EFA_DOMAIN_H
#define EFA_DOMAIN_H

#include "fabric.h"
#include "mr_cache.h"
#include "verbs/resources.h"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace efa {

struct Mr;

/* Another provider's domain that holds a copy of each registration under the same key
 * (the shm path's, rdm/shm.h), so a peer's RMA finds it whichever path it takes. Called
 * under Domain::lock. */
struct MrMirror {
	/* 0, or -FI_E* (the registration then fails). */
	virtual int mirror_reg(const Mr &m) = 0;
	virtual void mirror_dereg(const Mr &m) = 0;

protected:
	~MrMirror() = default;
};

struct Domain {
	fid_domain dom; /* first */
	ObjHeader hdr;
	static constexpr Magic kMagic = Magic::Domain;
	Fabric *fabric;
	const verbs::Device *dev;
	verbs::Pd pd;
	fi_info *info; /* the info it was opened with (a copy) */
	int mr_mode;
	fi_threading threading;
	bool rx_cq_data; /* FI_RX_CQ_DATA mode: remote CQ data consumes posted receives */
	bool rdm;	 /* a domain of the efa fabric (RDM protocol endpoints) */
	bool dgram;	 /* a <device>-dgrm domain: FI_EP_DGRAM endpoints over UD QPs */

	/* A shared address handle. */
	struct AhRef {
		verbs::Ah ah;
		uint32_t refs;
	};
	std::mutex lock;
	std::unordered_map<std::string, std::unique_ptr<AhRef>> ahs; /* by raw GID */
	std::unordered_map<uint64_t, struct Mr *> mr_keys;	   /* efa fabric: by key */
	std::vector<MrMirror *> mr_mirrors;			   /* efa fabric: see MrMirror */
	/* efa fabric: the registrations it makes for itself (mr_cache.h); created at open,
	 * destroyed after the PD's last endpoint is gone (before the PD). */
	std::unique_ptr<MrCache> mr_cache;

	/* The AH towards `gid` (created on first use); release it with put_ah. */
	AhRef *get_ah(const uint8_t gid[16], int *err);
	void put_ah(AhRef *ah);
};

int domain_open(fid_fabric *fabric, fi_info *info, fid_domain **domain, void *context);

struct Mr {
	fid_mr mr; /* first; mr.mem_desc points back here, mr.key is the rkey */
	ObjHeader hdr;
	static constexpr Magic kMagic = Magic::Mr;
	Domain *dom;
	verbs::Mr vmr;
	uint64_t access;
	uintptr_t addr;
	size_t len;
};

/* The Mr behind a memory descriptor, or null if `desc` is not one of `dom`. */
inline Mr *mr_from_desc(void *desc, const Domain *dom)
{
	Mr *m = static_cast<Mr *>(desc);
	return m && m->hdr.magic == Mr::kMagic && m->dom == dom ? m : nullptr;
}

/* The Mr behind `desc` when it also covers [buf, buf + len), or null. */
inline Mr *mr_covering(void *desc, const Domain *dom, const void *buf, size_t len)
{
	Mr *m = mr_from_desc(desc, dom);
	const uintptr_t a = reinterpret_cast<uintptr_t>(buf);
	return m && a >= m->addr && a - m->addr + len <= m->len ? m : nullptr;
}

extern fi_ops_mr g_mr_ops;

} // namespace efa

#endif
