/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "cntr.h"

#include "cq.h"
#include "log.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace efa {

namespace {

Cntr *cntr_of(fid_cntr *f) { return f ? fid_to<Cntr>(&f->fid) : nullptr; }

uint64_t cntr_read(fid_cntr *f)
{
	Cntr *c = cntr_of(f);
	if (!c)
		return 0;
	c->progress();
	return c->value.load(std::memory_order_acquire);
}

uint64_t cntr_readerr(fid_cntr *f)
{
	Cntr *c = cntr_of(f);
	if (!c)
		return 0;
	c->progress();
	return c->err.load(std::memory_order_acquire);
}

int cntr_add(fid_cntr *f, uint64_t v)
{
	Cntr *c = cntr_of(f);
	if (!c)
		return -FI_EINVAL;
	c->value.fetch_add(v);
	return 0;
}

int cntr_set(fid_cntr *f, uint64_t v)
{
	Cntr *c = cntr_of(f);
	if (!c)
		return -FI_EINVAL;
	c->value.store(v);
	return 0;
}

int cntr_adderr(fid_cntr *f, uint64_t v)
{
	Cntr *c = cntr_of(f);
	if (!c)
		return -FI_EINVAL;
	c->err.fetch_add(v);
	return 0;
}

int cntr_seterr(fid_cntr *f, uint64_t v)
{
	Cntr *c = cntr_of(f);
	if (!c)
		return -FI_EINVAL;
	c->err.store(v);
	return 0;
}

/*
 * Waits until the count reaches `threshold`: -FI_ETIMEDOUT after `timeout` ms (< 0:
 * forever), -FI_EAVAIL as soon as the error count moves.
 */
int cntr_wait(fid_cntr *f, uint64_t threshold, int timeout)
{
	Cntr *c = cntr_of(f);
	if (!c)
		return -FI_EINVAL;
	using clock = std::chrono::steady_clock;
	const auto deadline = clock::now() + std::chrono::milliseconds(timeout);
	const uint64_t err0 = c->err.load();
	for (;;) {
		c->progress();
		if (c->value.load(std::memory_order_acquire) >= threshold)
			return 0;
		if (c->err.load() != err0)
			return -FI_EAVAIL;
		if (timeout >= 0 && clock::now() >= deadline)
			return -FI_ETIMEDOUT;
		sched_yield();
	}
}

int cntr_close(fid_t f)
{
	Cntr *c = fid_to<Cntr>(f);
	if (!c)
		return -FI_EINVAL;
	if (c->hdr.children.load())
		return -FI_EBUSY;
	c->dom->hdr.children--;
	retire(c);
	return 0;
}

fi_ops g_cntr_fi_ops = {
	.size = sizeof(fi_ops),
	.close = cntr_close,
	.bind = no_bind,
	.control = no_control,
	.ops_open = no_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

fi_ops_cntr g_cntr_ops = {
	.size = sizeof(fi_ops_cntr),
	.read = cntr_read,
	.readerr = cntr_readerr,
	.add = cntr_add,
	.set = cntr_set,
	.wait = cntr_wait,
	.adderr = cntr_adderr,
	.seterr = cntr_seterr,
};

} // namespace

void Cntr::add_cq(Cq *cq)
{
	std::lock_guard g(lock);
	cqs.push_back(cq);
}

void Cntr::remove_cq(Cq *cq)
{
	std::lock_guard g(lock);
	auto it = std::find(cqs.begin(), cqs.end(), cq);
	if (it != cqs.end())
		cqs.erase(it);
}

void Cntr::progress()
{
	std::lock_guard g(lock);
	for (Cq *cq : cqs)
		cq->poke();
}

int cntr_open(fid_domain *df, fi_cntr_attr *attr, fid_cntr **out, void *context)
{
	Domain *d = fid_to<Domain>(&df->fid);
	if (!d || !attr || !out)
		return -FI_EINVAL;
	if (attr->events != FI_CNTR_EVENTS_COMP) {
		EFA_WARN(Cntr, "fi_cntr_open: only FI_CNTR_EVENTS_COMP counters");
		return -FI_ENOSYS;
	}
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) {
		EFA_WARN(Cntr, "fi_cntr_open: wait object %d not supported (FI_WAIT_NONE, FI_WAIT_UNSPEC)", int(attr->wait_obj));
		return -FI_ENOSYS;
	}
	if (attr->flags)
		return -FI_EINVAL;
	auto *c = new Cntr();
	c->hdr.magic = Cntr::kMagic;
	c->cntr.fid.fclass = FI_CLASS_CNTR;
	c->cntr.fid.context = context;
	c->cntr.fid.ops = &g_cntr_fi_ops;
	c->cntr.ops = &g_cntr_ops;
	c->dom = d;
	c->lock.set_threading(d->threading);
	d->hdr.children++;
	*out = &c->cntr;
	return 0;
}

} // namespace efa
