/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Same-host peers through libfabric's shm provider (shm.h). */
#include "rdm/shm.h"

#include "fid.h"
#include "info.h"
#include "log.h"
#include "params.h"
#include "rdm/ep.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>

#include <arpa/inet.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace efa::rdm {

#if EFA_SHM_PATH

namespace {

/* libfabric's flag for a provider's own fi_getinfo (1.17: ofi_getinfo's "hidden"
 * providers): it lists providers that FI_PROVIDER left out, as FI_PROVIDER=efa does shm. */
constexpr uint64_t kGetinfoHidden = 1ULL << 60;

/* The process's shm info and fabric: opened by the first endpoint that uses shm, closed
 * by the last. Our lock is never held across a call into libfabric: libfabric holds its
 * own while it calls a provider (fi_getinfo, fi_fini), and the two orders would cross. */
struct ShmFabric {
	std::mutex lock;
	bool failed = false;
	int users = 0;
	fi_info *info = nullptr;
	fid_fabric *fabric = nullptr;
};

ShmFabric &shm_fabric()
{
	static ShmFabric f;
	return f;
}

/* A reference to the shm info and fabric, or null (the reason logged once). */
fi_info *shm_acquire(fid_fabric *&fabric)
{
	ShmFabric &f = shm_fabric();
	{
		std::lock_guard g(f.lock);
		if (f.failed)
			return nullptr;
		if (f.info) {
			f.users++;
			fabric = f.fabric;
			return f.info;
		}
	}
	fi_info *hints = fi_allocinfo();
	if (!hints)
		return nullptr;
	hints->fabric_attr->prov_name = strdup("shm");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_SOURCE;
	hints->domain_attr->threading = FI_THREAD_DOMAIN; /* under the endpoint's lock */
	hints->domain_attr->mr_mode = 0;
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	int r = fi_getinfo(fi_version(), nullptr, nullptr, kGetinfoHidden, hints, &info);
	fi_freeinfo(hints);
	if (r == 0 && (r = fi_fabric(info->fabric_attr, &fab, nullptr)) != 0) {
		fi_freeinfo(info);
		info = nullptr;
	}
	bool first_failure = false, lost_race = false;
	{
		std::lock_guard g(f.lock);
		if (r) {
			first_failure = !f.failed;
			f.failed = true;
		} else if (f.info) {
			lost_race = true; /* another endpoint opened it meanwhile */
			f.users++;
		} else {
			f.info = info;
			f.fabric = fab;
			f.users = 1;
		}
		fabric = f.fabric;
	}
	if (r) {
		if (first_failure)
			EFA_INFO(EpCtrl, "same-host peers go through the device: libfabric's shm provider is not "
				 "available (%s); FI_EFA_ENABLE_SHM_TRANSFER=0 silences this", fi_strerror(-r));
		return nullptr;
	}
	if (lost_race) { /* ours is closed; the shared one, referenced above, stays */
		fi_close(&fab->fid);
		fi_freeinfo(info);
		std::lock_guard g(f.lock);
		return f.info;
	}
	return info;
}

/* Gives the reference back; the last closes the fabric. */
void shm_release()
{
	ShmFabric &f = shm_fabric();
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	{
		std::lock_guard g(f.lock);
		if (--f.users == 0) {
			std::swap(info, f.info);
			std::swap(fab, f.fabric);
		}
	}
	if (fab)
		fi_close(&fab->fid);
	if (info)
		fi_freeinfo(info);
}

/* Upstream's shm endpoint name for an address: GID_QPN_QKEY_UID. */
std::string shm_name(const RawAddr &a)
{
	char gid[INET6_ADDRSTRLEN] = {};
	inet_ntop(AF_INET6, a.gid, gid, sizeof gid);
	char name[128];
	snprintf(name, sizeof name, "%s_%04x_%08x_%04x", gid, unsigned(a.qpn), unsigned(a.qkey), unsigned(getuid()));
	return name;
}

int srx_close(fid_t) { return 0; }

fi_ops g_srx_fi_ops = {
	.size = sizeof(fi_ops),
	.close = srx_close,
	.bind = no_bind,
	.control = no_control,
	.ops_open = no_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

void *const g_null_desc[kMaxRmaIov + 1] = {};

/* A pull slot's size: a tagged message that arrives before its receive and is longer
 * fails (shm.h). */
constexpr size_t kSlotSize = size_t(1) << 30;
/* Pulled bytes a slot keeps resident; beyond, its pages are given back after each use. */
constexpr size_t kSlotKeep = 64 * 1024;

void *reserve(size_t len)
{
	void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return nullptr;
	madvise(p, len, MADV_DONTFORK);
	return p;
}

/* The process's truncation sink (shm.h): address space only, never read. */
constexpr size_t kSinkSize = size_t(1) << 30;

void *sink()
{
	static void *base = reserve(kSinkSize);
	return base;
}

/* Gives back the pages a truncated message wrote into the sink. */
void sink_release(uint64_t bytes)
{
	const size_t page = size_t(sysconf(_SC_PAGESIZE));
	const size_t len = std::min<size_t>(kSinkSize, (bytes + page - 1) / page * page);
	if (len)
		madvise(sink(), len, MADV_DONTNEED);
}

} // namespace

fi_ops_srx_owner ShmPath::owner_ops_ = {
	.size = sizeof(fi_ops_srx_owner),
	.get_msg = get_msg,
	.get_tag = get_tag,
	.queue_msg = queue,
	.queue_tag = queue,
	.free_entry = free_entry,
};

std::unique_ptr<ShmPath> ShmPath::open(Ep &ep)
{
	if (!params().enable_shm_transfer)
		return nullptr;
	const uint64_t caps = ep.info->caps;
	if ((caps & FI_REMOTE_COMM) && !(caps & FI_LOCAL_COMM)) {
		EFA_DBG(EpCtrl, "no shm path: the endpoint asked for FI_REMOTE_COMM without FI_LOCAL_COMM");
		return nullptr;
	}
	std::unique_ptr<ShmPath> s(new ShmPath(ep));
	if (int r = s->init()) {
		EFA_INFO(EpCtrl, "same-host peers go through the device: opening a shm endpoint failed (%s)",
			 fi_strerror(-r));
		return nullptr;
	}
	return s;
}

int ShmPath::init()
{
	fid_fabric *fabric = nullptr;
	/* The peer interface (rdma/fi_ext.h) as libfabric 1.17 declares it, which we are
	 * built against; later versions changed get_tag and the rx entry. */
	if (fi_version() != FI_VERSION(1, 17)) {
		EFA_INFO(EpCtrl, "same-host peers go through the device: the shm path is built for libfabric 1.17's "
			 "peer interface and this is %u.%u", FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
		return -FI_ENOSYS;
	}
	fi_info *info = shm_acquire(fabric);
	if (!info)
		return -FI_ENODATA;
	holds_fabric_ = true;
	srx_.srx.ep_fid.fid.fclass = FI_CLASS_SRX_CTX;
	srx_.srx.ep_fid.fid.ops = &g_srx_fi_ops;
	srx_.srx.owner_ops = &owner_ops_;
	srx_.path = this;
	inject_size_ = info->tx_attr->inject_size;
	iov_limit_ = info->rx_attr->iov_limit;
	txs_.set_cap(ep_.info->tx_attr->size);

	if (int r = fi_domain(fabric, info, &domain_, nullptr))
		return r;
	fi_av_attr aa{};
	aa.type = FI_AV_TABLE;
	if (int r = fi_av_open(domain_, &aa, &av_, nullptr))
		return r;
	fi_cq_attr ca{};
	ca.format = FI_CQ_FORMAT_TAGGED;
	ca.size = ep_.info->tx_attr->size;
	if (int r = fi_cq_open(domain_, &ca, &tx_cq_, nullptr))
		return r;
	ca.size = ep_.info->rx_attr->size;
	if (int r = fi_cq_open(domain_, &ca, &rx_cq_, nullptr))
		return r;
	/* Our receive queue is shm's: the domain takes it before the endpoint exists, the
	 * endpoint by binding it. */
	fi_peer_srx_context pc{sizeof pc, &srx_.srx};
	fi_rx_attr ra = *info->rx_attr;
	ra.op_flags = FI_PEER;
	fid_ep *unused = nullptr;
	if (int r = fi_srx_context(domain_, &ra, &unused, &pc))
		return r;
	if (int r = fi_endpoint(domain_, info, &ep_shm_, nullptr))
		return r;
	const std::string name = shm_name(ep_.self_addr());
	if (int r = fi_setname(&ep_shm_->fid, const_cast<char *>(name.c_str()), name.size() + 1))
		return r;
	if (int r = fi_ep_bind(ep_shm_, &srx_.srx.ep_fid.fid, 0))
		return r;
	if (int r = fi_ep_bind(ep_shm_, &av_->fid, 0))
		return r;
	if (int r = fi_ep_bind(ep_shm_, &tx_cq_->fid, FI_TRANSMIT))
		return r;
	if (int r = fi_ep_bind(ep_shm_, &rx_cq_->fid, FI_RECV))
		return r;
	if (int r = fi_enable(ep_shm_))
		return r;
	if (!srx_.srx.peer_ops) {
		EFA_INFO(EpCtrl, "shm did not take our receive queue (no peer operations)");
		return -FI_ENOSYS;
	}
	EFA_DBG(EpCtrl, "shm endpoint %s for same-host peers", name.c_str());
	return 0;
}

ShmPath::~ShmPath()
{
	if (stats_.sends || stats_.recvs)
		EFA_INFO(EpCtrl, "efa endpoint: %lu sends and %lu receives (%lu unexpected) through shm",
			 (unsigned long)stats_.sends, (unsigned long)stats_.recvs, (unsigned long)stats_.unexpected);
	if (ep_shm_)
		fi_close(&ep_shm_->fid);
	if (tx_cq_)
		fi_close(&tx_cq_->fid);
	if (rx_cq_)
		fi_close(&rx_cq_->fid);
	if (av_)
		fi_close(&av_->fid);
	if (domain_)
		fi_close(&domain_->fid);
	for (Slot &sl : slots_)
		if (sl.base)
			munmap(sl.base, kSlotSize);
	if (holds_fabric_)
		shm_release();
}

/* ------------------------------------------------------------------ addresses */

size_t ShmPath::av_count() const { return ep_.av->count.load(std::memory_order_acquire); }

bool ShmPath::valid(fi_addr_t a) const { return ep_.av->lookup(a) != nullptr; }

void ShmPath::sync()
{
	const size_t n = av_count();
	const RawAddr self = ep_.self_addr();
	to_shm_.resize(n, FI_ADDR_NOTAVAIL);
	for (size_t a = scanned_; a < n; a++) {
		const AvEntry *e = ep_.av->lookup(a);
		if (!e || std::memcmp(e->addr.gid, self.gid, sizeof self.gid) != 0)
			continue;
		const std::string name = shm_name(e->addr);
		fi_addr_t sa = FI_ADDR_NOTAVAIL;
		if (fi_av_insert(av_, name.c_str(), 1, &sa, 0, nullptr) != 1) {
			EFA_WARN(Av, "shm refused the same-host peer %s; it goes through the device",
				 addr_to_string(e->addr).c_str());
			continue;
		}
		to_shm_[a] = sa;
		if (sa >= from_shm_.size())
			from_shm_.resize(sa + 1, FI_ADDR_NOTAVAIL);
		from_shm_[sa] = a;
	}
	scanned_ = n;
}

/* ------------------------------------------------------------------ sends */

ssize_t ShmPath::send(const SendArgs &a, fi_addr_t dest)
{
	uint64_t len = 0;
	if (ssize_t r = send_iovs(a, len))
		return r;
	const bool inject = a.flags & FI_INJECT;
	if (inject && len > ep_.inject_size) {
		EFA_WARN_ONCE(EpData, "inject of %lu bytes: more than tx_attr->inject_size (%zu); use fi_send",
			      (unsigned long)len, ep_.inject_size);
		return -FI_EMSGSIZE;
	}
	TxShm *t = txs_.get();
	if (!t)
		return -FI_EAGAIN;
	t->context = a.context;
	t->flags = FI_SEND | (a.tagged ? FI_TAGGED : FI_MSG);
	t->completion = !inject && ep_.tx_completion(a.flags);
	uint64_t flags = (a.flags & (FI_REMOTE_CQ_DATA | FI_DELIVERY_COMPLETE | FI_TRANSMIT_COMPLETE)) | FI_COMPLETION;
	const iovec *iov = a.iov;
	size_t count = a.count;
	iovec copy;
	if (inject) {
		if (len <= inject_size_) {
			flags |= FI_INJECT;
		} else {
			/* shm takes fewer bytes inline than we promise: our copy stays until it is done. */
			t->bounce.resize(len);
			iov_to_buf(a.iov, a.count, 0, t->bounce.data(), len);
			copy = iovec{t->bounce.data(), len};
			iov = &copy;
			count = 1;
		}
	}
	ssize_t r;
	if (a.tagged) {
		const fi_msg_tagged m{iov, const_cast<void **>(g_null_desc), count, dest, a.tag, 0, t, a.data};
		r = fi_tsendmsg(ep_shm_, &m, flags);
	} else {
		const fi_msg m{iov, const_cast<void **>(g_null_desc), count, dest, t, a.data};
		r = fi_sendmsg(ep_shm_, &m, flags);
	}
	if (r) {
		txs_.put(t);
		return r;
	}
	stats_.sends++;
	return 0;
}

void ShmPath::tx_done(TxShm *t, int err, uint32_t prov_errno)
{
	ep_.count(kCntrSend, !err);
	if (err) {
		if (t->context || t->completion)
			ep_.report_error(ep_.tx_cq, t->context, t->flags, err, prov_errno,
					 std::string("shm send to a same-host peer failed: ") + fi_strerror(err));
	} else if (t->completion && ep_.tx_cq) {
		fi_cq_tagged_entry e{};
		e.op_context = t->context;
		e.flags = t->flags;
		ep_.tx_cq->push(e, FI_ADDR_NOTAVAIL);
	}
	txs_.put(t);
}

/* ------------------------------------------------------------------ receives */

int ShmPath::get_msg(fid_peer_srx *s, fi_addr_t addr, size_t size, fi_peer_rx_entry **e)
{
	return srx_of(s)->path->arrival(false, addr, 0, size, e);
}

int ShmPath::get_tag(fid_peer_srx *s, fi_addr_t addr, uint64_t tag, fi_peer_rx_entry **e)
{
	/* libfabric 1.17 does not pass a tagged message's length. */
	return srx_of(s)->path->arrival(true, addr, tag, 0, e);
}

int ShmPath::arrival(bool tagged, fi_addr_t addr, uint64_t tag, uint64_t size, fi_peer_rx_entry **out)
{
	Entry *x = entries_.get();
	if (!x)
		return -FI_ENOMEM;
	fi_peer_rx_entry &e = x->e;
	e = fi_peer_rx_entry{};
	e.srx = &srx_.srx;
	e.addr = addr;
	e.tag = tag;
	e.size = size;
	const fi_addr_t src = addr < from_shm_.size() ? from_shm_[addr] : FI_ADDR_NOTAVAIL;
	MsgRx *m = ep_.rx.shm_arrival(tagged, src, tag, size, &e);
	if (!m) {
		entries_.put(x);
		EFA_WARN_ONCE(EpData, "a same-host message found no free message entry; raise rx_attr->size");
		return -FI_ENOMEM;
	}
	stats_.recvs++;
	*out = &e;
	if (m->bound) {
		m->sink = fill(e, *m, m->dst, m->dst_count, m->tagged || m->msg_len > m->cap);
		return 0;
	}
	e.owner_context = m; /* until bound: queue() and free_entry() find it */
	return -FI_ENOENT;
}

int ShmPath::queue(fi_peer_rx_entry *e)
{
	ShmPath *path = srx_of(e->srx)->path;
	MsgRx *m = static_cast<MsgRx *>(e->owner_context);
	path->stats_.unexpected++;
	path->ep_.rx.shm_queue(*m);
	/* Pulled once shm's progress has returned (it holds its locks now). */
	m->pull_queued = true;
	path->pulls_.push_back(m);
	return 0;
}

void ShmPath::unqueue_pull(MsgRx &m)
{
	if (!m.pull_queued)
		return;
	m.pull_queued = false;
	for (auto it = pulls_.begin(); it != pulls_.end(); ++it)
		if (*it == &m) {
			pulls_.erase(it);
			break;
		}
}

void ShmPath::run_pulls()
{
	for (auto it = pulls_.begin(); it != pulls_.end();) {
		MsgRx *m = *it;
		if (!pull(*m)) {
			++it; /* no slot free: a later look */
			continue;
		}
		m->pull_queued = false;
		it = pulls_.erase(it);
	}
}

bool ShmPath::pull(MsgRx &m)
{
	auto *e = static_cast<fi_peer_rx_entry *>(m.shm);
	iovec to;
	if (!m.tagged) { /* its length is known (Receiver::shm_arrival) */
		m.shm_buf.reset(new uint8_t[std::max<uint64_t>(m.msg_len, 1)]);
		to = iovec{m.shm_buf.get(), m.msg_len};
	} else {
		Slot *sl = nullptr;
		for (Slot &c : slots_)
			if (!c.busy && (c.base || (c.base = reserve(kSlotSize)))) {
				sl = &c;
				break;
			}
		if (!sl)
			return false;
		sl->busy = true;
		m.slot = int8_t(sl - slots_);
		to = iovec{sl->base, kSlotSize};
	}
	/* A tagged one beyond its slot goes on into the sink: no truncation hang (pull_done). */
	fill(*e, m, &to, 1, m.tagged);
	m.pulling = true;
	if (int r = copy(*e, m.tagged)) {
		EFA_WARN(EpData, "shm could not copy an unexpected same-host message: %s", fi_strerror(-r));
		pull_done(m, 0, 0, false, -r);
	}
	return true;
}

void ShmPath::pull_done(MsgRx &m, uint64_t len, uint64_t data, bool has_data, int err)
{
	if (m.slot >= 0) {
		Slot &sl = slots_[m.slot];
		if (!err && len > kSlotSize) {
			EFA_WARN(EpData, "a same-host tagged message of %lu bytes arrived before its receive, more than a "
				 "pull slot holds (%zu): it fails with FI_EMSGSIZE; post such receives first",
				 (unsigned long)len, kSlotSize);
			err = FI_EMSGSIZE;
			sink_release(len - kSlotSize);
		}
		if (!err) {
			m.shm_buf.reset(new uint8_t[std::max<uint64_t>(len, 1)]);
			std::memcpy(m.shm_buf.get(), sl.base, len);
		}
		if (len > kSlotKeep)
			madvise(sl.base, std::min<size_t>(kSlotSize, (len + 4095) & ~size_t(4095)), MADV_DONTNEED);
		sl.busy = false;
		m.slot = -1;
	}
	if (err)
		m.shm_buf.reset();
	ep_.rx.shm_pulled(m, len, data, has_data, err);
}

void ShmPath::rx_completion(MsgRx &m, uint64_t len, uint64_t olen, uint64_t data, bool has_data, int err)
{
	if (m.pulling)
		pull_done(m, len + olen, data, has_data, err);
	else
		ep_.rx.shm_done(m, len, olen, data, has_data, err);
}

void ShmPath::free_entry(fi_peer_rx_entry *e)
{
	Srx *s = srx_of(e->srx);
	/* A message shm could not keep (never queued) goes with its entry. */
	if (auto *m = static_cast<MsgRx *>(e->owner_context); m && !m->on_list()) {
		s->path->stats_.recvs--;
		s->path->ep_.rx.shm_forget(*m);
	}
	s->path->entries_.put(reinterpret_cast<Entry *>(e));
}

bool ShmPath::fill(fi_peer_rx_entry &e, MsgRx &m, const iovec *iov, size_t count, bool with_sink)
{
	e.owner_context = nullptr; /* shm's from here: it frees the entry when done */
	m.shm = nullptr;
	Entry &x = reinterpret_cast<Entry &>(e);
	std::copy(iov, iov + count, x.iov);
	e.iov = x.iov;
	e.count = count;
	/* One that may not fit takes the sink as its last iov (the top of shm.h). */
	bool sunk = false;
	if (with_sink && count < iov_limit_ && count < kMaxRmaIov + 1) {
		if (void *s = sink()) {
			x.iov[e.count++] = iovec{s, kSinkSize};
			sunk = true;
		}
	}
	e.desc = const_cast<void **>(g_null_desc);
	e.context = &m; /* shm's completion names the message */
	e.flags = FI_COMPLETION | FI_RECV | (m.tagged ? FI_TAGGED : FI_MSG);
	return sunk;
}

int ShmPath::copy(fi_peer_rx_entry &e, bool tagged)
{
	return tagged ? srx_.srx.peer_ops->start_tag(&e) : srx_.srx.peer_ops->start_msg(&e);
}

int ShmPath::start(MsgRx &m)
{
	unqueue_pull(m);
	auto *e = static_cast<fi_peer_rx_entry *>(m.shm);
	m.sink = fill(*e, m, m.dst, m.dst_count, m.tagged || m.msg_len > m.cap);
	return copy(*e, m.tagged);
}

void ShmPath::discard(MsgRx &m)
{
	unqueue_pull(m);
	auto *e = static_cast<fi_peer_rx_entry *>(m.shm);
	e->owner_context = nullptr;
	m.shm = nullptr;
	if (m.tagged)
		srx_.srx.peer_ops->discard_tag(e);
	else
		srx_.srx.peer_ops->discard_msg(e);
}

/* ------------------------------------------------------------------ progress */

void ShmPath::progress()
{
	/* Senders inserted since the last look: shm names them by our AV's fi_addr. */
	if (av_count() != scanned_)
		sync();
	fi_cq_tagged_entry c[16];
	for (;;) {
		const ssize_t n = fi_cq_read(rx_cq_, c, 16);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++) {
				MsgRx &m = *static_cast<MsgRx *>(c[i].op_context);
				if (m.sink && c[i].len > m.cap)
					sink_release(c[i].len - m.cap);
				rx_completion(m, c[i].len, 0, c[i].data, c[i].flags & FI_REMOTE_CQ_DATA, 0);
			}
			continue;
		}
		if (n == -FI_EAVAIL) {
			fi_cq_err_entry ee{};
			if (fi_cq_readerr(rx_cq_, &ee, 0) != 1)
				break;
			/* libfabric 1.17's shm reports some errors negated (its truncation). */
			const int err = ee.err < 0 ? -ee.err : ee.err;
			MsgRx &m = *static_cast<MsgRx *>(ee.op_context);
			uint64_t len = ee.len, olen = ee.olen;
			if (err == FI_ETRUNC && len + olen <= m.cap) {
				/* It did not fit even with the sink, or had no sink: its length is
				 * lost (shm says neither), at least this much. */
				len = m.cap;
				olen = m.sink ? kSinkSize
					      : (!m.tagged && m.msg_len > m.cap ? m.msg_len - m.cap : 0);
				EFA_WARN_ONCE(EpData, "shm truncated a same-host message without saying its length; "
					      "FI_ETRUNC reports olen %lu (post receives of 3 iovs or fewer)",
					      (unsigned long)olen);
			}
			if (m.sink)
				sink_release(kSinkSize);
			EFA_DBG(EpData, "shm receive error: %s (len %zu, olen %zu)", fi_strerror(err), ee.len, ee.olen);
			rx_completion(m, len, olen, ee.data, ee.flags & FI_REMOTE_CQ_DATA, err);
			continue;
		}
		/* Messages that found no receive: copied now that shm's progress returned; a
		 * copy shm makes at once completes on the next read. */
		if (pulls_.empty())
			break;
		const size_t before = pulls_.size();
		run_pulls();
		if (pulls_.size() == before)
			break;
	}
	/* Reading the receive CQ ran shm's progress; its transmit CQ holds completions
	 * only while sends are out. */
	while (txs_.in_use()) {
		const ssize_t n = fi_cq_read(tx_cq_, c, 16);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				tx_done(static_cast<TxShm *>(c[i].op_context), 0, 0);
			continue;
		}
		if (n != -FI_EAVAIL)
			break;
		fi_cq_err_entry ee{};
		if (fi_cq_readerr(tx_cq_, &ee, 0) != 1)
			break;
		tx_done(static_cast<TxShm *>(ee.op_context), ee.err < 0 ? -ee.err : ee.err, uint32_t(ee.prov_errno));
	}
}

#else /* built against another libfabric than 1.17: no shm path (shm.h) */

std::unique_ptr<ShmPath> ShmPath::open(Ep &)
{
	if (params().enable_shm_transfer)
		EFA_INFO(EpCtrl, "same-host peers go through the device: this provider was built against libfabric "
			 "%d.%d, and its shm path needs libfabric 1.17's peer interface", FI_MAJOR_VERSION,
			 FI_MINOR_VERSION);
	return nullptr;
}

/* Never reached: open() makes none. */
ShmPath::~ShmPath() = default;
int ShmPath::init() { return -FI_ENOSYS; }
size_t ShmPath::av_count() const { return 0; }
bool ShmPath::valid(fi_addr_t) const { return false; }
void ShmPath::sync() {}
ssize_t ShmPath::send(const SendArgs &, fi_addr_t) { return -FI_ENOSYS; }
void ShmPath::progress() {}
int ShmPath::start(MsgRx &) { return -FI_ENOSYS; }
void ShmPath::discard(MsgRx &) {}

#endif

} // namespace efa::rdm
