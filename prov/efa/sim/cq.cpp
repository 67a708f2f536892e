/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Completion queues of the software EFA device: the ibv_cq_ex poll ops, the efadv_cq
 * ops, the legacy ibv_poll_cq, and completion-channel notification.
 *
 * The ring is written by the device (holding Runtime::lock) and read by the application
 * (holding Cq::poll_lock between start_poll and end_poll). start_poll() on an empty ring
 * makes the device progress: it drains the sockets of the CQ's QPs and runs due timers
 * in the calling thread. A ring that is full spills into an overflow list, counted as an
 * overrun but never lost.
 */
#include "sim.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace efasim {

namespace {

struct DvCq;

/* The efadv_cq handed out by efadv_cq_from_ibv_cq_ex() sits at Cq::dv. */
constexpr size_t kDvOffset = offsetof(Cq, dv);

/*
 * The next completion: 0, ENOENT when there is none, or EINVAL when it belonged to a QP
 * destroyed since (consumed). rdma-core's EFA provider finds no QP for such a completion
 * and answers EINVAL from start_poll/next_poll (ibv_poll_cq: -EINVAL when it is the
 * first), as long as another QP still uses the CQ; a CQ no QP uses any more is not
 * polled at all (ENOENT). Software that destroys a QP and then drains its CQ relies on
 * never seeing such completions (upstream's efa provider looks the QP up and crashes).
 */
int pop(Cq *cq)
{
	for (;;) {
		const uint32_t t = cq->tail.load(std::memory_order_relaxed);
		if (cq->head.load(std::memory_order_acquire) == t)
			return ENOENT;
		cq->cur = cq->ring[t & cq->mask];
		cq->tail.store(t + 1, std::memory_order_release);
		if (cq->ndead.load(std::memory_order_acquire) && cq->is_dead(cq->cur.qp_gen)) {
			if (cq->live_qps.load(std::memory_order_relaxed))
				return EINVAL;
			continue;
		}
		cq->ex.wr_id = cq->cur.wr_id;
		cq->ex.status = wc_status_of(cq->cur.status);
		return 0;
	}
}

void note_poll(Cq *cq)
{
	/* An armed CQ belongs to a thread about to sleep: let the engine serve it. */
	if (cq->armed.load(std::memory_order_relaxed))
		return;
	const uint64_t now = now_ns();
	cq->last_poll_ns.store(now, std::memory_order_relaxed);
	cq->rt->last_poll_any.store(now, std::memory_order_relaxed);
}

bool progress_due(Cq *cq)
{
	return cq->empty() || now_ns() >= cq->rt->timer_hint.load(std::memory_order_relaxed);
}

int start_poll(ibv_cq_ex *ex, ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL;
	Cq *cq = Cq::from(ex);
	cq->poll_lock.lock();
	note_poll(cq);
	if (progress_due(cq))
		cq->rt->progress_cq(cq);
	if (int r = pop(cq)) {
		cq->poll_lock.unlock();
		return r;
	}
	return 0;
}

int next_poll(ibv_cq_ex *ex) { return pop(Cq::from(ex)); }

void end_poll(ibv_cq_ex *ex) { Cq::from(ex)->poll_lock.unlock(); }

ibv_wc_opcode read_opcode(ibv_cq_ex *ex) { return ibv_wc_opcode(Cq::from(ex)->cur.opcode); }
uint32_t read_vendor_err(ibv_cq_ex *ex) { return Cq::from(ex)->cur.status; }
uint32_t read_byte_len(ibv_cq_ex *ex) { return Cq::from(ex)->cur.byte_len; }
__be32 read_imm_data(ibv_cq_ex *ex) { return Cq::from(ex)->cur.imm; }
uint32_t read_qp_num(ibv_cq_ex *ex) { return Cq::from(ex)->cur.qp_num; }
uint32_t read_src_qp(ibv_cq_ex *ex) { return Cq::from(ex)->cur.src_qp; }
unsigned int read_wc_flags(ibv_cq_ex *ex) { return Cq::from(ex)->cur.wc_flags; }
uint32_t read_slid(ibv_cq_ex *ex) { return Cq::from(ex)->cur.slid; }
uint8_t read_sl(ibv_cq_ex *ex) { return Cq::from(ex)->cur.sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex *) { return 0; }
uint64_t read_zero64(ibv_cq_ex *) { return 0; }
uint16_t read_cvlan(ibv_cq_ex *) { return 0; }
uint32_t read_flow_tag(ibv_cq_ex *) { return 0; }
void read_tm_info(ibv_cq_ex *, ibv_wc_tm_info *info) { std::memset(info, 0, sizeof *info); }

int wc_read_sgid(efadv_cq *dv, ibv_gid *sgid)
{
	Cq *cq = Cq::from_dv(dv);
	if (!cq->cur.has_sgid)
		return -ENOENT; /* the sender's AH is known: read slid instead */
	std::memcpy(sgid->raw, cq->cur.sgid.raw, 16);
	return 0;
}

bool wc_is_unsolicited(efadv_cq *dv) { return Cq::from_dv(dv)->cur.unsolicited != 0; }

constexpr uint64_t kSupportedWcFlags = IBV_WC_STANDARD_FLAGS;

} // namespace

Cq *Cq::from_dv(efadv_cq *c) { return reinterpret_cast<Cq *>(reinterpret_cast<uint8_t *>(c) - kDvOffset); }

void Runtime::push_cqe(const Qp *owner, Cq *cq, Cqe &e)
{
	e.qp_num = owner->qpn;
	e.qp_gen = owner->gen;
	const uint32_t h = cq->head.load(std::memory_order_relaxed);
	if (!cq->overflow.empty() || h - cq->tail.load(std::memory_order_acquire) > cq->mask) {
		if (cq->overflow.empty())
			SIM_WARN("efasim%d: CQ of %d entries overrun: completions are kept beyond its size; "
				 "create larger CQs or poll more often",
				 index, cq->ex.cqe);
		stats.cq_overruns++;
		cq->overflow.push_back(e);
	} else {
		cq->ring[h & cq->mask] = e;
		cq->head.store(h + 1, std::memory_order_release);
	}
	if (cq->armed.exchange(false, std::memory_order_acq_rel) && cq->channel) {
		CompChannel *ch = cq->channel;
		{
			std::lock_guard<std::mutex> g(ch->lock);
			ch->events.push_back(cq);
		}
		uint64_t one = 1;
		ssize_t r = write(ch->ch.fd, &one, sizeof one);
		(void)r;
	}
}

Cq *create_cq(ibv_context *c, ibv_cq_init_attr_ex *attr, uint64_t efa_wc_flags)
{
	if (!c || !attr) {
		errno = EINVAL;
		return nullptr;
	}
	if (attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN))) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if (attr->wc_flags & ~kSupportedWcFlags) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	if (attr->cqe == 0 || attr->cqe > (1u << 22) || attr->comp_vector >= uint32_t(c->num_comp_vectors)) {
		errno = EINVAL;
		return nullptr;
	}
	uint32_t depth = 16;
	while (depth < attr->cqe)
		depth <<= 1;
	auto *cq = new (std::nothrow) Cq();
	Cqe *ring = new (std::nothrow) Cqe[depth];
	if (!cq || !ring) {
		delete cq;
		delete[] ring;
		errno = ENOMEM;
		return nullptr;
	}
	static std::atomic<uint32_t> handles{1};
	cq->ctx = Context::from(c);
	cq->rt = cq->ctx->rt;
	cq->ring = ring;
	cq->mask = depth - 1;
	cq->wc_flags = attr->wc_flags;
	cq->efa_wc_flags = efa_wc_flags;
	cq->channel = reinterpret_cast<CompChannel *>(attr->channel);
	if (cq->channel)
		cq->channel->ch.refcnt++;

	ibv_cq_ex &ex = cq->ex;
	ex.context = c;
	ex.channel = attr->channel;
	ex.cq_context = attr->cq_context;
	ex.handle = handles++;
	ex.cqe = int(depth);
	pthread_mutex_init(&ex.mutex, nullptr);
	pthread_cond_init(&ex.cond, nullptr);
	ex.start_poll = start_poll;
	ex.next_poll = next_poll;
	ex.end_poll = end_poll;
	ex.read_opcode = read_opcode;
	ex.read_vendor_err = read_vendor_err;
	ex.read_byte_len = read_byte_len;
	ex.read_imm_data = read_imm_data;
	ex.read_qp_num = read_qp_num;
	ex.read_src_qp = read_src_qp;
	ex.read_wc_flags = read_wc_flags;
	ex.read_slid = read_slid;
	ex.read_sl = read_sl;
	ex.read_dlid_path_bits = read_dlid_path_bits;
	ex.read_completion_ts = read_zero64;
	ex.read_cvlan = read_cvlan;
	ex.read_flow_tag = read_flow_tag;
	ex.read_tm_info = read_tm_info;
	ex.read_completion_wallclock_ns = read_zero64;

	cq->dv.comp_mask = 0;
	cq->dv.wc_read_sgid = wc_read_sgid;
	cq->dv.wc_is_unsolicited = wc_is_unsolicited;
	return cq;
}

namespace ops {

ibv_cq_ex *create_cq_ex(ibv_context *ctx, ibv_cq_init_attr_ex *attr)
{
	Cq *cq = create_cq(ctx, attr, 0);
	return cq ? &cq->ex : nullptr;
}

int req_notify_cq(ibv_cq *c, int solicited_only)
{
	(void)solicited_only; /* every EFA completion is an event */
	Cq *cq = Cq::from(c);
	if (!cq->channel)
		return EINVAL;
	Runtime *rt = cq->rt;
	cq->armed.store(true, std::memory_order_release);
	/*
	 * The arming thread is about to sleep: it polls no more. When it was the latest
	 * poller of the device, the engine must not wait for pollers to run timers or drain
	 * sockets: forget the poll, and wake the engine if it sleeps past due work.
	 */
	uint64_t mine = cq->last_poll_ns.exchange(0, std::memory_order_relaxed);
	if (mine)
		rt->last_poll_any.compare_exchange_strong(mine, 0, std::memory_order_relaxed);
	if (rt->engine_has_deferred.load(std::memory_order_relaxed) || rt->timer_hint.load() < rt->engine_wake_at.load())
		rt->kick();
	return 0;
}

int poll_cq(ibv_cq *c, int n, ibv_wc *wc)
{
	if (n < 0 || (n && !wc))
		return -EINVAL;
	Cq *cq = Cq::from(c);
	std::lock_guard<std::mutex> g(cq->poll_lock);
	note_poll(cq);
	if (progress_due(cq))
		cq->rt->progress_cq(cq);
	int got = 0;
	while (got < n) {
		if (int r = pop(cq)) {
			if (r == EINVAL && got == 0)
				return -EINVAL;
			break;
		}
		const Cqe &e = cq->cur;
		ibv_wc &w = wc[got++];
		std::memset(&w, 0, sizeof w);
		w.wr_id = e.wr_id;
		w.status = wc_status_of(e.status);
		w.opcode = ibv_wc_opcode(e.opcode);
		w.vendor_err = e.status;
		w.byte_len = e.byte_len;
		w.imm_data = e.imm;
		w.qp_num = e.qp_num;
		w.src_qp = e.src_qp;
		w.wc_flags = e.wc_flags;
		w.slid = e.slid;
		w.sl = e.sl;
	}
	return got;
}

} // namespace ops

} // namespace efasim

using namespace efasim;

EFASIM_EXPORT ibv_cq *ibv_create_cq(ibv_context *c, int cqe, void *cq_context, ibv_comp_channel *channel,
				    int comp_vector)
{
	if (cqe <= 0 || comp_vector < 0) {
		errno = EINVAL;
		return nullptr;
	}
	ibv_cq_init_attr_ex attr{};
	attr.cqe = uint32_t(cqe);
	attr.cq_context = cq_context;
	attr.channel = channel;
	attr.comp_vector = uint32_t(comp_vector);
	attr.wc_flags = IBV_WC_STANDARD_FLAGS;
	Cq *cq = create_cq(c, &attr, 0);
	return cq ? ibv_cq_ex_to_cq(&cq->ex) : nullptr;
}

EFASIM_EXPORT int ibv_destroy_cq(ibv_cq *c)
{
	if (!c)
		return EINVAL;
	Cq *cq = Cq::from(c);
	{
		std::lock_guard<std::mutex> g(cq->rt->lock);
		if (!cq->qps.empty())
			return EBUSY;
	}
	if (CompChannel *ch = cq->channel) {
		std::lock_guard<std::mutex> g(ch->lock);
		for (auto it = ch->events.begin(); it != ch->events.end();)
			it = *it == cq ? ch->events.erase(it) : it + 1;
		ch->ch.refcnt--;
	}
	pthread_mutex_destroy(&cq->ex.mutex);
	pthread_cond_destroy(&cq->ex.cond);
	delete[] cq->ring;
	delete cq;
	return 0;
}
