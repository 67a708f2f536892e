/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The RDM endpoint's life: open, bind, options, enable, close; the completion hook. */
#include "rdm/ep.h"

#include "info.h"
#include "rdm/attrs.h"
#include "rdm/entry.h"
#include "log.h"
#include "params.h"
#include "tclass.h"

#include <rdma/fi_ext_efa.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace efa::rdm {

/* ------------------------------------------------------------------ hook */

uint32_t Hook::qpn() const { return ep_->qp.qpn(); }

void Hook::on_wc(const verbs::Wc &wc, Cq &)
{
	std::lock_guard g(ep_->lock);
	ep_->sync_removed();
	Pkt *pkt = reinterpret_cast<Pkt *>(wc.wr_id);
	if (wc.is_recv()) {
		ep_->rx_done(pkt, wc);
	} else {
		Peer *p = pkt->peer; /* outlives the work request (Ep::unpost) */
		ep_->tx_done(pkt, wc);
		ep_->unpost(p);
	}
}

void Hook::on_progress(Cq &cq)
{
	/* Progress is per endpoint (FI_PROGRESS_MANUAL): reading either of its CQs also
	 * drains the other, or transmit buffers would never come back to an application
	 * that reads only its receive CQ. Whoever holds the other CQ is draining it. */
	Cq *other = &cq == ep_->send_cq() ? ep_->recv_cq() : ep_->send_cq();
	if (other && other != &cq)
		other->try_poll_device(64);
	std::lock_guard g(ep_->lock);
	ep_->progress();
}

namespace {

Ep *ep_of(fid_t f) { return fid_to<Ep>(f); }

/* ------------------------------------------------------------------ fi_ops */

int ep_close(fid_t f)
{
	Ep *ep = ep_of(f);
	return ep ? ep->close() : -FI_EINVAL;
}

int ep_bind(fid_t f, fid_t bf, uint64_t flags)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	std::lock_guard g(ep->lock);
	return ep->bind(bf, flags);
}

int ep_control(fid_t f, int command, void *arg)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	switch (command) {
	case FI_ENABLE: {
		{
			std::lock_guard g(ep->lock);
			if (int r = ep->enable())
				return r;
		}
		/* The completion path takes a CQ's lock, then the endpoint's: attach to the
		 * CQs (their locks) without holding the endpoint's. */
		ep->attach(&ep->hook);
		std::lock_guard g(ep->lock);
		ep->start();
		return 0;
	}
	case FI_GETOPSFLAG:
	case FI_SETOPSFLAG: {
		uint64_t *flags = static_cast<uint64_t *>(arg);
		if (!flags || !(*flags & (FI_TRANSMIT | FI_RECV)) ||
		    (*flags & (FI_TRANSMIT | FI_RECV)) == (FI_TRANSMIT | FI_RECV))
			return -FI_EINVAL;
		uint64_t &target = (*flags & FI_TRANSMIT) ? ep->tx_op_flags : ep->rx_op_flags;
		if (command == FI_GETOPSFLAG)
			*flags = target;
		else
			target = *flags & ~uint64_t(FI_TRANSMIT | FI_RECV);
		return 0;
	}
	default:
		return -FI_ENOSYS;
	}
}

/* FI_EFA_STATS_OPS (fi_ext_efa.h): statistics and hang reports, on an enabled
 * endpoint, under its lock. */
template <typename F> auto with_enabled(fid_ep *f, F &&fn) -> decltype(fn(*static_cast<Ep *>(nullptr)))
{
	Ep *ep = f ? ep_of(&f->fid) : nullptr;
	if (!ep || !ep->enabled)
		return -FI_EINVAL;
	std::lock_guard g(ep->lock);
	return fn(*ep);
}

ssize_t stats_query_ep(fid_ep *f, fi_efa_ep_stats *out, size_t len)
{
	if (!out)
		return -FI_EINVAL;
	return with_enabled(f, [&](Ep &ep) { return ep.query_stats(out, len); });
}

ssize_t stats_query_peer(fid_ep *f, fi_addr_t addr, fi_efa_peer_stats *out, size_t len)
{
	if (!out)
		return -FI_EINVAL;
	return with_enabled(f, [&](Ep &ep) { return ep.query_peer(addr, out, len); });
}

int stats_report(fid_ep *f, uint64_t min_age_ms)
{
	return with_enabled(f, [&](Ep &ep) { return ep.report(min_age_ms * 1000000ull, "asked by the application"); });
}

fi_efa_ops_stats g_stats_ops = {
	.size = sizeof(fi_efa_ops_stats),
	.query_ep = stats_query_ep,
	.query_peer = stats_query_peer,
	.report = stats_report,
};

int ep_ops_open(fid_t f, const char *name, uint64_t flags, void **ops, void *)
{
	if (!ep_of(f) || !name || !ops || flags)
		return -FI_EINVAL;
	if (strcmp(name, FI_EFA_STATS_OPS))
		return -FI_ENOSYS;
	*ops = &g_stats_ops;
	return 0;
}

fi_ops g_ep_fi_ops = {
	.size = sizeof(fi_ops),
	.close = ep_close,
	.bind = ep_bind,
	.control = ep_control,
	.ops_open = ep_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

ssize_t ep_cancel(fid_t f, void *context)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	std::lock_guard g(ep->lock);
	return ep->rx.cancel(context);
}

int ep_getopt(fid_t f, int level, int name, void *val, size_t *len)
{
	Ep *ep = ep_of(f);
	if (!ep || !val || !len)
		return -FI_EINVAL;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	const verbs::Device &dev = *ep->dom->dev;
	switch (name) {
	case FI_OPT_MIN_MULTI_RECV: return put_opt<size_t>(val, len, ep->min_multi_recv);
	/* What this endpoint's device makes it emulate; a peer without RDMA makes the
	 * protocol emulate too, per operation. */
	case FI_OPT_EFA_EMULATED_READ: return put_opt<bool>(val, len, !dev.rdma_read());
	case FI_OPT_EFA_EMULATED_WRITE: return put_opt<bool>(val, len, !dev.rdma_write());
	case FI_OPT_EFA_EMULATED_ATOMICS: return put_opt<bool>(val, len, true);
	default: return ep->getopt_common(name, val, len);
	}
}

int ep_setopt(fid_t f, int level, int name, const void *val, size_t len)
{
	Ep *ep = ep_of(f);
	if (!ep || !val)
		return -FI_EINVAL;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	std::lock_guard g(ep->lock);
	switch (name) {
	case FI_OPT_MIN_MULTI_RECV:
		if (len != sizeof(size_t))
			return -FI_EINVAL;
		ep->min_multi_recv = *static_cast<const size_t *>(val);
		ep->rx.set_min_multi_recv(ep->min_multi_recv); /* fi_enable configures it too */
		return 0;
	case FI_OPT_EFA_USE_DEVICE_RDMA:
		if (len != sizeof(bool))
			return -FI_EINVAL;
		if (*static_cast<const bool *>(val) && !ep->dom->dev->rdma_read()) {
			EFA_WARN(EpCtrl, "FI_OPT_EFA_USE_DEVICE_RDMA true: this device has no RDMA read");
			return -FI_EOPNOTSUPP;
		}
		ep->use_device_rdma = *static_cast<const bool *>(val);
		ep->tx.set_use_device_rdma(ep->use_device_rdma); /* fi_enable configures it too */
		return 0;
	case FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV:
		/* Off, peers write with data through the protocol instead (the handshake says
		 * the QP lacks it): no unsolicited completion can crowd the receive CQ. */
		if (ep->enabling) {
			EFA_WARN(EpCtrl, "FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV must be set before fi_enable");
			return -FI_EINVAL;
		}
		return ep->setopt_common(name, val, len);
	default:
		return ep->setopt_common(name, val, len);
	}
}

/* Operation entries free (the pools' caps are the attributes' sizes). */
ssize_t rx_size_left(fid_ep *f)
{
	return size_left<Ep>(f, [](Ep &ep) {
		std::lock_guard g(ep.lock);
		return ep.info->rx_attr->size - std::min(ep.info->rx_attr->size, ep.rx.posted_count());
	});
}

ssize_t tx_size_left(fid_ep *f)
{
	return size_left<Ep>(f, [](Ep &ep) {
		std::lock_guard g(ep.lock);
		return ep.info->tx_attr->size - std::min(ep.info->tx_attr->size, ep.tx.in_use());
	});
}

fi_ops_ep g_ep_ops = {
	.size = sizeof(fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
	.tx_ctx = ep_no_tx_ctx,
	.rx_ctx = ep_no_rx_ctx,
	.rx_size_left = rx_size_left,
	.tx_size_left = tx_size_left,
};


} // namespace

/* ------------------------------------------------------------------ lifecycle */

int Ep::enable()
{
	if (enabled || enabling)
		return -FI_EINVAL;
	if (int r = check_bindings())
		return r;
	install_report_signal();
	const verbs::Device &dev = *dom->dev;
	const Params &prm = params();
	mtu = dev.mtu();
	inject_size = std::min(info->tx_attr->inject_size, rdm_limits(dev).inject);
	/* Protocol thresholds: upstream's on hardware. The software device sends a medium
	 * message's packets, posted behind one doorbell, in one system call, and serves an
	 * RDMA read between two of its processes with one copy: there medium pays up to
	 * 64 KiB as on hardware, and the read-based protocol right above it, where hardware
	 * uses long-CTS up to 1 MiB (performance.md, "Protocol thresholds"). */
	const bool sw = dev.software();
	max_medium = prm.max_medium_msg_size != kParamUnset ? prm.max_medium_msg_size : 65536;
	min_read = prm.min_read_msg_size != kParamUnset ? prm.min_read_msg_size : sw ? 65536 : 1048576;
	/* Toward upstream's provider, upstream's defaults unless set: with a truncating
	 * receive it sends no EOR for a 64 KiB read-based message (interop matrix, ft_tagged
	 * -L), a size its own sender never reads. */
	max_medium_foreign = prm.max_medium_msg_size != kParamUnset ? prm.max_medium_msg_size : 65536;
	min_read_foreign = prm.min_read_msg_size != kParamUnset ? prm.min_read_msg_size : 1048576;
	credits = std::max<size_t>(prm.tx_min_credits, 1);
	rx_window = std::bit_ceil(uint32_t(std::clamp<size_t>(prm.recvwin_size, 16, 1u << 30)));
	peers.init(dom, av, rx_window, &io);
	rm_enabled = info->domain_attr->resource_mgmt != FI_RM_DISABLED;
	directed = info->caps & FI_DIRECTED_RECV;
	if (!min_multi_recv)
		min_multi_recv = mtu - kEagerHdrMax;
	io.set_backoff(uint32_t(prm.timeout_interval), uint32_t(std::max<size_t>(prm.max_timeout, 40)));
	probe_ns = uint64_t(prm.peer_probe_interval) * 1000000;
	/* The v4 extra features we implement, and our request for the connid header
	 * (protocol.md section 3). */
	features = v4::kExtraDeliveryComplete | v4::kExtraConnIdHeader | v4::kExtraRunt;
	device_version = dev.attr().vendor_part_id;
	if (dev.rdma_read())
		features |= v4::kExtraRdmaRead;
	if (dev.rdma_write())
		features |= v4::kExtraRdmaWrite;

	const size_t ntx = std::clamp<size_t>(prm.tx_pkt_pool_size, 8, dev.efa().max_sq_wr);
	const size_t nrx = std::clamp<size_t>(prm.rx_pkt_pool_size, 8, dev.efa().max_rq_wr);
	Cq *scq = send_cq(), *rcq = recv_cq();
	/* Every packet this endpoint can have on the device holds a device CQ entry. */
	const int64_t need_s = int64_t(ntx), need_r = int64_t(nrx);
	if (scq->slots.fetch_sub(need_s) < need_s) {
		scq->slots.fetch_add(need_s);
		EFA_WARN(EpCtrl, "fi_enable: the transmit CQ has no room for %zu more packets; open another CQ", ntx);
		return -FI_ENOSPC;
	}
	if (rcq->slots.fetch_sub(need_r) < need_r) {
		rcq->slots.fetch_add(need_r);
		scq->slots.fetch_add(need_s);
		EFA_WARN(EpCtrl, "fi_enable: the receive CQ has no room for %zu more packets; open another CQ", nrx);
		return -FI_ENOSPC;
	}
	auto undo_slots = [&] {
		scq->slots.fetch_add(need_s);
		rcq->slots.fetch_add(need_r);
	};

	qkey = random_qkey();
	verbs::QpAttr qa;
	qa.sq_depth = uint32_t(ntx);
	qa.rq_depth = uint32_t(nrx);
	qa.unsolicited_write_recv = use_unsolicited_write_recv;
	qa.sl = endpoint_sl(info, dom->info);
	qa.processing_hints = true; /* for device RDMA writes with FI_EFA_WR_HIGH_PPS */
	qa.qkey = qkey;
	qa.rnr_retry = rnr_retry;
	auto q = verbs::Qp::create_srd(dev, dom->pd, scq->vcq, rcq->vcq, qa);
	if (!q.ok()) {
		undo_slots();
		return q.error();
	}
	qp = q.take();
	/* Peers learn what the QP has (the handshake): a write with data to a QP without
	 * unsolicited write receive takes one of its receive packets. */
	if (qp.features().unsolicited_write_recv)
		features |= v4::kExtraUnsolicitedWriteRecv;
	if (int r = io.init(dom->pd, qp, ntx, nrx, mtu, prm.rx_copy_max); r) {
		qp = verbs::Qp();
		undo_slots();
		return r;
	}
	TxConfig tc;
	tc.mtu = mtu;
	tc.inject_size = inject_size;
	tc.max_medium = max_medium;
	tc.min_read = min_read;
	tc.max_medium_foreign = max_medium_foreign;
	tc.min_read_foreign = min_read_foreign;
	tc.credits = credits;
	tc.size = info->tx_attr->size;
	tc.max_atomic = max_atomic(dev, info->caps);
	tc.max_rdma = dev.max_rdma_size();
	tc.features = features;
	tc.qkey = qkey;
	tc.self = self_addr();
	tc.rm_enabled = rm_enabled;
	tc.selective = tx_selective;
	tc.use_device_rdma = use_device_rdma;
	tx.configure(tc);
	RxConfig rc;
	rc.directed = directed;
	rc.selective = rx_selective;
	rc.min_multi_recv = min_multi_recv;
	rc.size = info->rx_attr->size;
	rc.qkey = qkey;
	rc.cts_window = credits * (mtu - kCtsDataHdr);
	rc.max_read = dev.max_rdma_size();
	rx.configure(rc);
	shm = ShmPath::open(*this);
	if (shm) {
		scq->polled++;
		if (rcq != scq)
			rcq->polled++;
	}
	enabling = true;
	return 0;
}

void Ep::start()
{
	peers.listen();
	io.start();
	enabling = false;
	enabled = true;
	report_watch(this, true);
	const verbs::Device &dev = *dom->dev;
	const size_t ntx = io.tx_count(), nrx = io.rx_count();
	EFA_DBG(EpCtrl, "efa endpoint on %s: QP %u, qkey %#x, MTU %zu, %zu tx / %zu rx packets, inject %zu",
		dev.name().c_str(), qp.qpn(), qkey, mtu, ntx, nrx, inject_size);
}

int Ep::close()
{
	{
		std::lock_guard g(lock);
		if (hdr.children.load())
			return -FI_EBUSY;
	}
	if (enabled) {
		detach(&hook); /* takes the CQs' locks: no completion handler runs after this */
		std::lock_guard g(lock);
		if (params().report_at_close && (tx.busy() || rx.pending()))
			report(0, "fi_close with operations in progress");
		report_watch(this, false);
		if (shm) {
			shm.reset();
			send_cq()->polled--;
			if (recv_cq() != send_cq())
				recv_cq()->polled--;
		}
		qp = verbs::Qp(); /* its work is flushed without completions */
		send_cq()->slots.fetch_add(int64_t(io.tx_count()));
		recv_cq()->slots.fetch_add(int64_t(io.rx_count()));
		peers.unlisten(); /* before the AV binding goes */
		peers.clear();
		io.reset();
		enabled = false;
	}
	if (drops.malformed || drops.unknown || drops.dup || drops.far || drops.foreign)
		EFA_INFO(EpCtrl, "efa endpoint closed: dropped %lu malformed, %lu from unknown senders, %lu duplicate packets, "
			 "%lu requests beyond the reorder reach, %lu of another protocol version",
			 (unsigned long)drops.malformed, (unsigned long)drops.unknown, (unsigned long)drops.dup,
			 (unsigned long)drops.far, (unsigned long)drops.foreign);
	release_bindings();
	retire(this);
	return 0;
}

/* ------------------------------------------------------------------ receives (Ep::recv: ep.h) */

ssize_t Ep::recv_refused() const
{
	if (!enabled) {
		EFA_WARN_ONCE(EpData, "a receive before fi_enable: bind an AV and CQs, call fi_enable, then post");
		return -FI_EOPBADSTATE;
	}
	return -FI_ENOCQ;
}

void Ep::report_error(Cq *cq, void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &text,
		      uint64_t len, uint64_t olen, void *buf, uint64_t data, uint64_t tag)
{
	fi_cq_err_entry e{};
	e.op_context = context;
	e.flags = flags;
	e.len = len;
	e.buf = buf;
	e.data = data;
	e.tag = tag;
	e.olen = olen;
	e.err = err;
	e.prov_errno = int(prov_errno);
	/* Expected outcomes (cancel, truncation, peek misses, FI_ENORX) are the
	 * application's to report; the log keeps each one for debugging. */
	EFA_INFO(EpData, "error completion (%s, flags %#lx, tag %#lx, len %lu): %s", fi_strerror(err),
		 (unsigned long)flags, (unsigned long)tag, (unsigned long)len, text.c_str());
	cq->push_error(e, text);
}


/* The Sender's port (sender.h). */
size_t EpTxPort::tx_avail() { return ep_.io.tx_avail(); }
void EpTxPort::tx_put(Pkt *pkt) { ep_.io.put_tx(pkt); }
void EpTxPort::tx_handshake(Peer &p) { ep_.send_handshake(p); }

int EpTxPort::tx_read_key(void *buf, size_t len, void *desc, InternalMr &reg, uint64_t &key)
{
	const Mr *mr = mr_covering(desc, ep_.dom, buf, len);
	if (mr && (mr->access & FI_REMOTE_READ) && ep_.dom->dev->rdma_read()) {
		key = mr->mr.key;
		return 0;
	}
	if (int r = ep_.dom->mr_cache->get(buf, len, reg))
		return r;
	key = reg.rkey();
	return 0;
}

bool EpTxPort::tx_device_ok(const TxOp &op)
{
	if (op.iov_count > ep_.qp.features().max_send_sge)
		return false;
	for (size_t i = 0; i < op.iov_count; i++)
		if (op.iov[i].iov_len && !mr_covering(op.desc[i], ep_.dom, op.iov[i].iov_base, op.iov[i].iov_len))
			return false;
	return true;
}

bool EpTxPort::tx_data_lkey(void *desc, const void *buf, size_t len, uint32_t &lkey)
{
	const Mr *mr = mr_covering(desc, ep_.dom, buf, len);
	if (!mr || ep_.qp.features().max_send_sge < 2)
		return false;
	lkey = mr->vmr.lkey();
	return true;
}

int EpTxPort::tx_rdma(Pkt *pkt, const TxOp &op, bool write, uint64_t off, uint64_t len, uint64_t raddr, uint32_t rkey)
{
	verbs::Sge sge[kMaxRmaIov];
	size_t nsge = 0;
	uint64_t skip = off, want = len;
	for (size_t i = 0; i < op.iov_count && want; i++) {
		if (skip >= op.iov[i].iov_len) {
			skip -= op.iov[i].iov_len;
			continue;
		}
		const uint64_t take = std::min<uint64_t>(op.iov[i].iov_len - skip, want);
		const Mr *mr = mr_from_desc(op.desc[i], ep_.dom);
		sge[nsge++] = verbs::Sge{reinterpret_cast<uintptr_t>(op.iov[i].iov_base) + skip, uint32_t(take),
				      mr->vmr.lkey()};
		want -= take;
		skip = 0;
	}
	uint32_t vflags = 0;
	if (op.flags & FI_EFA_WR_HIGH_PPS)
		vflags |= verbs::kHighPps;
	/* The remote CQ data rides on the last work request of a write (unless it follows
	 * in EXT_WRITE_DATA). */
	if (write && (op.flags & FI_REMOTE_CQ_DATA) && !op.notice && off + len == op.len)
		vflags |= verbs::kWithImm;
	const uint64_t wr_id = reinterpret_cast<uint64_t>(pkt);
	const int r = write ? ep_.qp.write(wr_id, op.peer->dest, {sge, nsge}, rkey, raddr, uint32_t(op.data), vflags)
			    : ep_.qp.read(wr_id, op.peer->dest, {sge, nsge}, rkey, raddr, 0);
	if (!r)
		PacketIo::posted(*op.peer);
	return r;
}

void EpTxPort::tx_write_data(Peer &p, uint64_t data, uint64_t len)
{
	ep_.send_ctl(Ctl{&p, Type::ExtWriteData, 0, 0, 0, {}, data, len});
}

void EpTxPort::tx_complete(const fi_cq_tagged_entry &e) { ep_.tx_cq->push(e, FI_ADDR_NOTAVAIL); }

void EpTxPort::tx_error(void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &text,
			uint64_t len, uint64_t data, uint64_t tag)
{
	ep_.report_error(ep_.tx_cq, context, flags, err, prov_errno, text, len, 0, nullptr, data, tag);
}

void EpTxPort::tx_count(CntrIdx cntr, bool ok) { ep_.count(cntr, ok); }

/* The Receiver's port (receiver.h). */
Pkt *EpRxPort::rx_tx_pkt(Peer &p) { return ep_.tx_pkt(p, nullptr); }
void EpRxPort::rx_post(Pkt *pkt) { ep_.post(pkt); }
void EpRxPort::rx_put_tx(Pkt *pkt) { ep_.io.put_tx(pkt); }
Pkt *EpRxPort::rx_copy(Pkt &pkt) { return ep_.io.copy_of(pkt, true); }
void EpRxPort::rx_free_copy(Pkt *pkt) { ep_.io.free_copy(pkt); }
void EpRxPort::rx_adopt_pending() { ep_.adopt_pending(); }

int EpRxPort::rx_reg(void *buf, size_t len, InternalMr &out) { return ep_.dom->mr_cache->get(buf, len, out); }

int EpRxPort::rx_read(Pkt *pkt, void *buf, uint32_t len, const InternalMr &mr, uint64_t raddr, uint32_t rkey)
{
	Peer &p = *pkt->msg->peer;
	const verbs::Sge sge{reinterpret_cast<uintptr_t>(buf), len, mr.lkey()};
	if (int r = ep_.qp.read(reinterpret_cast<uint64_t>(pkt), p.dest, {&sge, 1}, rkey, raddr, 0))
		return r;
	PacketIo::posted(p);
	return 0;
}

void EpRxPort::rx_error(void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &text,
			uint64_t len, uint64_t olen, void *buf, uint64_t data, uint64_t tag)
{
	ep_.report_error(ep_.rx_cq, context, flags, err, prov_errno, text, len, olen, buf, data, tag);
}

int EpRxPort::rx_shm_start(MsgRx &m) { return ep_.shm ? ep_.shm->start(m) : -FI_ENOSYS; }

void EpRxPort::rx_shm_discard(MsgRx &m)
{
	if (ep_.shm)
		ep_.shm->discard(m);
}

int ep_open(fid_domain *df, fi_info *info, fid_ep **out, void *context)
{
	Domain *d = fid_to<Domain>(&df->fid);
	if (!d)
		return -FI_EINVAL;
	if (!info || !out || !info->ep_attr || !info->tx_attr || !info->rx_attr || !info->domain_attr) {
		EFA_WARN(EpCtrl, "fi_endpoint: pass the fi_info from fi_getinfo (with its ep, tx and rx attributes) "
			 "and a place for the endpoint");
		return -FI_EINVAL;
	}
	if (info->ep_attr->type != FI_EP_RDM) {
		EFA_WARN(EpCtrl, "fi_endpoint: the efa fabric offers FI_EP_RDM endpoints only");
		return -FI_EINVAL;
	}
	if (int r = check_tclass(info->tx_attr->tclass, "fi_endpoint", "tx_attr->tclass"))
		return r;
	auto *ep = new Ep();
	ep->hdr.magic = Ep::kMagic;
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = context;
	ep->ep.fid.ops = &g_ep_fi_ops;
	ep->ep.ops = &g_ep_ops;
	ep->ep.cm = &g_ep_cm_ops;
	ep->ep.msg = &g_msg_ops;
	ep->ep.tagged = &g_tagged_ops;
	ep->ep.rma = &g_rma_ops;
	ep->ep.atomic = &g_atomic_ops;
	ep->dom = d;
	ep->lock.set_threading(d->threading);
	ep->info = fi_dupinfo(info);
	ep->tx_op_flags = info->tx_attr->op_flags;
	ep->rx_op_flags = info->rx_attr->op_flags;
	ep->rnr_retry = 3; /* the device retries a little; the protocol backs off beyond */
	ep->use_unsolicited_write_recv = d->dev->unsolicited_write_recv() && params().use_unsolicited_write_recv;
	if (!ep->info->tx_attr->size)
		ep->info->tx_attr->size = kRdmQueueSize;
	if (!ep->info->rx_attr->size)
		ep->info->rx_attr->size = kRdmQueueSize;
	d->hdr.children++;
	*out = &ep->ep;
	return 0;
}

} // namespace efa::rdm
