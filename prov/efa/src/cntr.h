/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Counter (fi_cntr(3)): a success and an error count, bumped by endpoints for the events
 * they were bound with (FI_SEND, FI_RECV, FI_READ, FI_WRITE, FI_REMOTE_READ,
 * FI_REMOTE_WRITE). Reading or waiting on a counter drives the CQs of the endpoints bound
 * to it, so it progresses even when the application never reads those CQs.
 */
#ifndef EFA_CNTR_H
#define EFA_CNTR_H

#include "common/lock.h"
#include "domain.h"

#include <atomic>
#include <mutex>
#include <vector>

namespace efa {

struct Cq;

struct Cntr {
	fid_cntr cntr; /* first */
	ObjHeader hdr;
	static constexpr Magic kMagic = Magic::Cntr;
	Domain *dom;
	std::atomic<uint64_t> value{0};
	std::atomic<uint64_t> err{0};
	DataLock lock; /* off when the application serialises (common/lock.h) */
	std::vector<Cq *> cqs; /* CQs of the bound endpoints, to progress */

	void inc() { value.fetch_add(1, std::memory_order_release); }
	void inc_err() { err.fetch_add(1, std::memory_order_release); }
	void add_cq(Cq *cq);
	void remove_cq(Cq *cq);
	void progress();
};

int cntr_open(fid_domain *domain, fi_cntr_attr *attr, fid_cntr **cntr, void *context);

} // namespace efa

#endif
