/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Same-host peers through libfabric's shm provider (shm.h). */
#include "rdm/shm.h"

#include "fid.h"
#include "fork.h"
#include "info.h"
#include "log.h"
#include "params.h"
#include "rdm/ep.h"
#include "efa_errno.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ | FI_WRITE |
		      FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE;
	hints->domain_attr->threading = FI_THREAD_DOMAIN; /* each endpoint's: ShmPath::init */
	/* Our keys (the registrations are mirrored under them) and virtual addresses. */
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR;
	/* Ordered RMA: shm then checks every remote access against its registrations
	 * (without ordering it writes straight into the peer's memory, key unchecked). */
	hints->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAR |
				    FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAR | FI_ORDER_SAW;
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

void *reserve(size_t len) { return map_dontfork(len, true); }

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

/* The registrations an endpoint mirrored into its shm domain, published for same-host
 * initiators (shm.h, "Remote keys"): an open-addressed table (linear probing, deletion
 * by shifting back) in a shared memory file named after the endpoint's shm name.
 * Written by the target under its domain's lock; read by initiators under the table's
 * sequence count (odd while written), retried when it moved. */
constexpr uint32_t kKeyMagic = 0xefa5e702;
constexpr uint32_t kKeySlots = 8192; /* a power of two */
constexpr uint32_t kKeyMax = kKeySlots / 4 * 3;

struct KeySlot {
	uint64_t used; /* 0 or 1 */
	uint64_t key, addr, len, access;
};

struct KeyTable {
	uint32_t magic;
	uint32_t full;	/* a registration found no room: keys unpublished for good */
	uint64_t seq;	/* odd while written */
	uint64_t count; /* keys */
	KeySlot slot[kKeySlots];
};

/* Every field is read while another process may write it: atomically, relaxed. */
template <typename T> T ld(const T &v) { return std::atomic_ref<T>(const_cast<T &>(v)).load(std::memory_order_relaxed); }
template <typename T> void st(T &v, T x) { std::atomic_ref<T>(v).store(x, std::memory_order_relaxed); }

uint32_t key_hash(uint64_t key) { return uint32_t((key * 0x9e3779b97f4a7c15ULL) >> 40) & (kKeySlots - 1); }
uint32_t next_slot(uint32_t h) { return (h + 1) & (kKeySlots - 1); }

std::string key_table_name(const std::string &shm_name) { return "/efa_keys_" + shm_name; }

/* Announcements (shm.h, "Senders"; rdm/shm_inbox.h): the same file holds, past the key
 * table, the inbox in which each same-host sender writes its address before its first
 * message to the endpoint. */
using inbox::Inbox;

/* Where the inbox starts: a multiple of any page size, so it can be mapped alone. */
constexpr size_t kInboxOffset = (sizeof(KeyTable) + 65535) & ~size_t(65535);
constexpr size_t kTableFileSize = kInboxOffset + sizeof(Inbox);

Inbox *map_inbox(int fd)
{
	struct stat st{};
	if (fstat(fd, &st) != 0 || size_t(st.st_size) < kTableFileSize)
		return nullptr;
	void *p = mmap(nullptr, sizeof(Inbox), PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(kInboxOffset));
	return p == MAP_FAILED ? nullptr : static_cast<Inbox *>(p);
}

/* What announcing ourselves to an endpoint found. */
enum class Announce { Done, Full, Absent };

/* Writes `self` into the inbox of the endpoint whose table is `name`: Full when its
 * inbox is full or unreadable (another build), Absent when it has no table (gone, or
 * shm off there). */
Announce announce(const std::string &name, const RawAddr &self)
{
	const int fd = shm_open(name.c_str(), O_RDWR, 0);
	if (fd < 0)
		return Announce::Absent;
	Inbox *in = map_inbox(fd);
	close(fd);
	if (!in)
		return Announce::Full;
	const bool ok = inbox::readable(*in) && inbox::announce(*in, self);
	munmap(in, sizeof(Inbox));
	return ok ? Announce::Done : Announce::Full;
}

void *map_key_table(const std::string &name, bool create)
{
	const int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
			      : shm_open(name.c_str(), O_RDONLY, 0);
	if (fd < 0)
		return nullptr;
	if (create && ftruncate(fd, kTableFileSize) != 0) {
		close(fd);
		shm_unlink(name.c_str());
		return nullptr;
	}
	struct stat st{};
	void *p = MAP_FAILED;
	if (fstat(fd, &st) == 0 && size_t(st.st_size) >= sizeof(KeyTable))
		p = mmap(nullptr, sizeof(KeyTable), create ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		if (create)
			shm_unlink(name.c_str());
		return nullptr;
	}
	return p;
}

void write_begin(KeyTable &t)
{
	st(t.seq, t.seq + 1);
	std::atomic_thread_fence(std::memory_order_release);
}

void write_end(KeyTable &t)
{
	std::atomic_thread_fence(std::memory_order_release);
	st(t.seq, t.seq + 1);
}

/* The slot holding `key`, or the empty one ending its run. */
uint32_t key_slot(const KeyTable &t, uint64_t key)
{
	uint32_t h = key_hash(key);
	for (uint32_t i = 0; i < kKeySlots && ld(t.slot[h].used) && ld(t.slot[h].key) != key; i++)
		h = next_slot(h);
	return h;
}

/* Publishes m's key (false: the table is full). */
bool key_add(KeyTable &t, const Mr &m)
{
	if (t.count >= kKeyMax)
		return false;
	KeySlot &k = t.slot[key_slot(t, m.mr.key)];
	write_begin(t);
	st(k.key, m.mr.key);
	st(k.addr, uint64_t(m.addr));
	st(k.len, uint64_t(m.len));
	st(k.access, m.access);
	if (!k.used) {
		st(k.used, uint64_t(1));
		t.count++;
	}
	write_end(t);
	return true;
}

/* Unpublishes `key`: its run closes up behind it (no tombstones to fill the table). */
void key_remove(KeyTable &t, uint64_t key)
{
	uint32_t hole = key_slot(t, key);
	if (!t.slot[hole].used)
		return;
	write_begin(t);
	for (uint32_t j = next_slot(hole); t.slot[j].used; j = next_slot(j)) {
		/* An entry moves into the hole when its home is not cyclically in (hole, j]. */
		const uint32_t home = key_hash(t.slot[j].key);
		const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
		if (stays)
			continue;
		KeySlot &d = t.slot[hole], &e = t.slot[j];
		st(d.key, e.key);
		st(d.addr, e.addr);
		st(d.len, e.len);
		st(d.access, e.access);
		hole = j;
	}
	st(t.slot[hole].used, uint64_t(0));
	t.count--;
	write_end(t);
}

/* Whether t has `key` covering [addr, +len) with `access` (refusals logged). */
bool key_check(const KeyTable &t, uint64_t key, uint64_t addr, uint64_t len, uint64_t access)
{
	bool ok;
	uint64_t seq;
	do {
		while ((seq = ld(t.seq)) & 1)
			;
		std::atomic_thread_fence(std::memory_order_acquire);
		const KeySlot &k = t.slot[key_slot(t, key)];
		const uint64_t ka = ld(k.addr), kl = ld(k.len);
		ok = ld(k.used) && (ld(k.access) & access) == access && addr >= ka && len <= kl && addr - ka <= kl - len;
		std::atomic_thread_fence(std::memory_order_acquire);
	} while (ld(t.seq) != seq);
	if (!ok)
		EFA_WARN(EpData, "RMA to a same-host peer refused: key %#lx, [%#lx, +%lu) is no region of the peer's, "
			 "lies outside it or lacks %s", (unsigned long)key, (unsigned long)addr, (unsigned long)len,
			 access & FI_REMOTE_WRITE ? "FI_REMOTE_WRITE" : "FI_REMOTE_READ");
	return ok;
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

bool ShmPath::wanted(uint64_t caps)
{
	return params().enable_shm_transfer && !((caps & FI_REMOTE_COMM) && !(caps & FI_LOCAL_COMM));
}

std::unique_ptr<ShmPath> ShmPath::open(Ep &ep)
{
	if (!wanted(ep.info->caps)) {
		if (params().enable_shm_transfer)
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

	/* shm's domain locks as much as the application's threading asks of ours: under
	 * FI_THREAD_DOMAIN nothing runs beside the endpoint's calls; otherwise a
	 * registration (mirrored here) may run beside its progress. */
	std::unique_ptr<fi_info, void (*)(fi_info *)> mine(fi_dupinfo(info), fi_freeinfo);
	if (!mine)
		return -FI_ENOMEM;
	mine->domain_attr->threading =
		ep_.dom->threading == FI_THREAD_DOMAIN ? FI_THREAD_DOMAIN : FI_THREAD_SAFE;
	/* Remote addresses are virtual addresses, as ours (1.17's fi_getinfo answers 0,
	 * offsets into the region, whatever the hints ask). */
	mine->domain_attr->mr_mode = FI_MR_VIRT_ADDR;
	info = mine.get();
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
	/* Our registrations for same-host initiators to check (the top of shm.h). A file
	 * left by a process that died under this name goes first. */
	keys_name_ = key_table_name(name);
	keys_ = map_key_table(keys_name_, true);
	if (!keys_ && errno == EEXIST && shm_unlink(keys_name_.c_str()) == 0)
		keys_ = map_key_table(keys_name_, true);
	if (keys_) {
		static_cast<KeyTable *>(keys_)->magic = kKeyMagic;
		if (const int fd = shm_open(keys_name_.c_str(), O_RDWR, 0); fd >= 0) {
			if (Inbox *in = map_inbox(fd)) {
				inbox::init(*in);
				inbox_ = in;
			}
			close(fd);
		}
	}
	if (!inbox_)
		EFA_INFO(EpCtrl, "same-host peers reach this endpoint through the device: its inbox in %s could not be "
			 "mapped (%s)", keys_name_.c_str(), strerror(errno));
	if (!keys_)
		EFA_INFO(EpCtrl, "same-host peers' RMA and atomics to this endpoint go through the device: its key "
			 "table %s could not be created (%s)", keys_name_.c_str(), strerror(errno));
	if (int r = fi_ep_bind(ep_shm_, &srx_.srx.ep_fid.fid, 0))
		return r;
	if (int r = fi_ep_bind(ep_shm_, &av_->fid, 0))
		return r;
	/* Selective: shm completes what we post with FI_COMPLETION, not our injects. */
	if (int r = fi_ep_bind(ep_shm_, &tx_cq_->fid, FI_TRANSMIT | FI_SELECTIVE_COMPLETION))
		return r;
	if (int r = fi_ep_bind(ep_shm_, &rx_cq_->fid, FI_RECV))
		return r;
	if (int r = fi_enable(ep_shm_))
		return r;
	if (!srx_.srx.peer_ops) {
		EFA_INFO(EpCtrl, "shm did not take our receive queue (no peer operations)");
		return -FI_ENOSYS;
	}
	if (int r = open_remote_counters())
		return r;
	{
		std::lock_guard g(ep_.dom->lock);
		for (const auto &[key, mr] : ep_.dom->mr_keys)
			if (int r = mirror_reg(*mr))
				return r;
		ep_.dom->mr_mirrors.push_back(this);
		mirrors_ = true;
	}
	EFA_DBG(EpCtrl, "shm endpoint %s for same-host peers", name.c_str());
	return 0;
}

ShmPath::~ShmPath()
{
	if (stats_.sends || stats_.recvs || stats_.rma || stats_.atomics)
		EFA_INFO(EpCtrl, "efa endpoint: %lu sends and %lu receives (%lu unexpected), %lu RMA and %lu atomics "
			 "through shm; %lu times a message waited for its sender's announcement",
			 (unsigned long)stats_.sends, (unsigned long)stats_.recvs, (unsigned long)stats_.unexpected,
			 (unsigned long)stats_.rma, (unsigned long)stats_.atomics, (unsigned long)stats_.deferred);
	{
		std::lock_guard g(ep_.dom->lock);
		if (mirrors_) {
			auto &v = ep_.dom->mr_mirrors;
			v.erase(std::find(v.begin(), v.end(), static_cast<MrMirror *>(this)));
		}
		for (const auto &[mr, copy] : mrs_)
			fi_close(&copy->fid);
		mrs_.clear();
	}
	if (inbox_)
		munmap(inbox_, sizeof(Inbox));
	if (keys_) {
		munmap(keys_, sizeof(KeyTable));
		shm_unlink(keys_name_.c_str());
	}
	for (const void *t : peer_keys_)
		if (t && t != MAP_FAILED)
			munmap(const_cast<void *>(t), sizeof(KeyTable));
	if (ep_shm_)
		fi_close(&ep_shm_->fid);
	for (fid_cntr *c : rem_cntr_)
		if (c)
			fi_close(&c->fid);
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

bool ShmPath::announce_to(Known &k, const RawAddr &addr, const std::string &name)
{
	const Announce a = announce(key_table_name(name), ep_.self_addr());
	k.announced = a == Announce::Done;
	if (!k.announced)
		EFA_INFO(Av, "the same-host peer %s has %s: our messages to it go through the device",
			 addr_to_string(addr).c_str(),
			 a == Announce::Absent ? "no shm endpoint (gone, or shm off there)"
					       : "no room in its inbox for our address");
	return a != Announce::Absent;
}

ShmPath::Known &ShmPath::known(const RawAddr &addr, const std::string &name, bool announce_first)
{
	if (auto it = names_.find(name); it != names_.end())
		return it->second;
	Known k;
	/* Only a live endpoint goes into shm's AV: 1.17's shm gives the name of one that
	 * is gone a map slot it hands out again, and its AV then answers one fi_addr for
	 * two names (a message of the live one would name the dead one). Announcing
	 * ourselves checks it (its inbox exists while it does); a sender that announced
	 * itself was alive then. */
	if (announce_first && !announce_to(k, addr, name))
		return names_.emplace(name, k).first->second;
	if (fi_av_insert(av_, name.c_str(), 1, &k.sa, 0, nullptr) != 1) {
		EFA_WARN(Av, "shm refused the same-host peer %s; it goes through the device",
			 addr_to_string(addr).c_str());
		k.sa = FI_ADDR_NOTAVAIL;
	} else {
		if (k.sa >= sa_owner_.size())
			sa_owner_.resize(k.sa + 1);
		if (!sa_owner_[k.sa].empty()) {
			/* The endpoint that had it died between its check and the insert: shm
			 * handed its map slot, and with it this fi_addr, to this name, so what is
			 * sent to the fi_addr goes to this peer now. The dead one keeps the device
			 * (never two peers under one address). */
			EFA_WARN(Av, "shm gave the same-host peer %s the address of one that is gone (%s)",
				 addr_to_string(addr).c_str(), sa_owner_[k.sa].c_str());
			if (auto old = names_.find(sa_owner_[k.sa]); old != names_.end())
				old->second.sa = FI_ADDR_NOTAVAIL;
			std::replace(to_shm_.begin(), to_shm_.end(), k.sa, FI_ADDR_NOTAVAIL);
			if (k.sa < from_shm_.size())
				from_shm_[k.sa] = FI_ADDR_NOTAVAIL;
		}
		sa_owner_[k.sa] = name;
	}
	return names_.emplace(name, k).first->second;
}

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
		Known &k = known(e->addr, name, true);
		/* One that announced itself to us: we announce ourselves now. */
		if (k.announced < 0)
			announce_to(k, e->addr, name);
		if (k.sa == FI_ADDR_NOTAVAIL)
			continue;
		/* Our messages go through shm once the peer can name us (shm.h, "Senders"). */
		if (k.announced)
			to_shm_[a] = k.sa;
		if (k.sa >= from_shm_.size())
			from_shm_.resize(k.sa + 1, FI_ADDR_NOTAVAIL);
		from_shm_[k.sa] = a;
		/* Its messages that arrived before this insert come from `a` now. */
		if (k.heard)
			ep_.rx.shm_resolved(k.sa, a);
	}
	scanned_ = n;
}

void ShmPath::take_announcements()
{
	inbox::Inbox &in = *inbox_;
	inbox_rung_ = inbox::rung(in);
	inbox_dirty_ = false;
	const RawAddr self = ep_.self_addr();
	inbox::take(in, [&](const RawAddr &addr) {
		if (std::memcmp(addr.gid, self.gid, sizeof self.gid) == 0)
			known(addr, shm_name(addr), false).heard = true;
	});
}

bool ShmPath::announcement_waiting() const { return inbox::waiting(*inbox_); }

/* ------------------------------------------------------------------ sends */

ShmPath::TxShm *ShmPath::new_tx(void *context, uint64_t op_flags, uint64_t cq_flags, CntrIdx cntr)
{
	TxShm *t = txs_.get();
	if (!t)
		return nullptr;
	t->context = context;
	t->flags = cq_flags;
	t->cntr = cntr;
	t->completion = !(op_flags & FI_INJECT) && ep_.tx_completion(op_flags);
	return t;
}

uint64_t ShmPath::shm_flags(TxShm &t, uint64_t op_flags, const iovec *&iov, size_t &count, uint64_t len,
			    iovec &copy)
{
	const uint64_t flags =
		(op_flags & (FI_REMOTE_CQ_DATA | FI_DELIVERY_COMPLETE | FI_TRANSMIT_COMPLETE)) | FI_COMPLETION;
	if (!(op_flags & FI_INJECT))
		return flags;
	if (len <= inject_size_)
		return flags | FI_INJECT;
	/* shm takes fewer bytes inline than we promise: our copy stays until it is done. */
	t.bounce.resize(len);
	iov_to_buf(iov, count, 0, t.bounce.data(), len);
	copy = iovec{t.bounce.data(), len};
	iov = &copy;
	count = 1;
	return flags;
}

ssize_t ShmPath::posted(TxShm *t, ssize_t r)
{
	if (r)
		txs_.put(t);
	return r;
}

ssize_t ShmPath::begin_tx(Tx &x, const char *call, void *context, uint64_t op_flags, uint64_t cq_flags,
			  CntrIdx cntr, const iovec *iov, size_t count, uint64_t len)
{
	if ((op_flags & FI_INJECT) && len > ep_.inject_size) {
		EFA_WARN_ONCE(EpData, "%s with FI_INJECT of %lu bytes: more than tx_attr->inject_size (%zu)", call,
			      (unsigned long)len, ep_.inject_size);
		return -FI_EMSGSIZE;
	}
	x.t = new_tx(context, op_flags, cq_flags, cntr);
	if (!x.t)
		return -FI_EAGAIN;
	x.iov = iov;
	x.count = count;
	x.flags = shm_flags(*x.t, op_flags, x.iov, x.count, len, x.copy);
	return 0;
}

ssize_t ShmPath::send(const SendArgs &a, fi_addr_t dest)
{
	uint64_t len = 0;
	if (ssize_t r = send_iovs(a, len))
		return r;
	/* An inject shm takes inline is done when shm returns: no entry, no completion to
	 * read from shm (its transmit CQ is selective), counted now as shm counts its own. */
	if ((a.flags & (FI_INJECT | FI_DELIVERY_COMPLETE | FI_TRANSMIT_COMPLETE)) == FI_INJECT &&
	    len <= inject_size_ && len <= ep_.inject_size) {
		const ssize_t r = post_send(a, a.iov, a.count, dest, nullptr, FI_INJECT | (a.flags & FI_REMOTE_CQ_DATA));
		if (!r)
			ep_.count(kCntrSend, true);
		return r;
	}
	Tx x;
	if (ssize_t r = begin_tx(x, a.tagged ? "fi_tsend" : "fi_send", a.context, a.flags,
				 FI_SEND | (a.tagged ? FI_TAGGED : FI_MSG), kCntrSend, a.iov, a.count, len))
		return r;
	return posted(x.t, post_send(a, x.iov, x.count, dest, x.t, x.flags));
}

ssize_t ShmPath::post_send(const SendArgs &a, const iovec *iov, size_t count, fi_addr_t dest, TxShm *t,
			   uint64_t flags)
{
	ssize_t r;
	if (a.tagged) {
		const fi_msg_tagged m{iov, const_cast<void **>(g_null_desc), count, dest, a.tag, 0, t, a.data};
		r = fi_tsendmsg(ep_shm_, &m, flags);
	} else {
		const fi_msg m{iov, const_cast<void **>(g_null_desc), count, dest, t, a.data};
		r = fi_sendmsg(ep_shm_, &m, flags);
	}
	if (!r)
		stats_.sends++;
	return r;
}

ssize_t ShmPath::rma(const RmaArgs &a, uint64_t len, fi_addr_t dest)
{
	Tx x;
	if (ssize_t r = begin_tx(x, a.write ? "fi_write" : "fi_read", a.context, a.flags,
				 FI_RMA | (a.write ? FI_WRITE : FI_READ), a.write ? kCntrWrite : kCntrRead, a.iov, a.count,
				 len))
		return r;
	if (!remote_ok(dest, a.rma[0].key, a.rma[0].addr, len, a.write ? FI_REMOTE_WRITE : FI_REMOTE_READ)) {
		refuse(x.t);
		return 0;
	}
	/* Our keys are shm's (mirror_reg); remote addresses are virtual addresses on both. */
	const fi_msg_rma m{x.iov, const_cast<void **>(g_null_desc), x.count, dest, a.rma, a.rma_count, x.t, a.data};
	const ssize_t r = a.write ? fi_writemsg(ep_shm_, &m, x.flags) : fi_readmsg(ep_shm_, &m, x.flags);
	if (!r)
		stats_.rma++;
	return posted(x.t, r);
}

size_t ShmPath::atomic_count(AtomicKind kind, fi_datatype dt, fi_op op)
{
	size_t n = 0;
	int r;
	switch (kind) {
	case AtomicKind::Write:
		r = fi_atomicvalid(ep_shm_, dt, op, &n);
		break;
	case AtomicKind::Fetch:
		r = fi_fetch_atomicvalid(ep_shm_, dt, op, &n);
		break;
	default:
		r = fi_compare_atomicvalid(ep_shm_, dt, op, &n);
		break;
	}
	return r ? 0 : n;
}

ssize_t ShmPath::atomic(const AtomicArgs &a, fi_addr_t dest)
{
	const bool write = a.kind == AtomicKind::Write;
	TxShm *t = new_tx(a.context, a.flags, FI_ATOMIC | (write ? FI_WRITE : FI_READ), write ? kCntrWrite : kCntrRead);
	if (!t)
		return -FI_EAGAIN;
	const uint64_t access = write ? FI_REMOTE_WRITE
			       : a.op == FI_ATOMIC_READ ? FI_REMOTE_READ
							: FI_REMOTE_READ | FI_REMOTE_WRITE;
	if (!remote_ok(dest, a.rma[0].key, a.rma[0].addr, uint64_t(a.count) * atomic_datatype_size(a.dt), access)) {
		refuse(t);
		return 0;
	}
	/* shm copies the operands into its command as it posts: an inject needs nothing more. */
	const uint64_t flags = (a.flags & (FI_DELIVERY_COMPLETE | FI_TRANSMIT_COMPLETE)) | FI_COMPLETION;
	/* FI_ATOMIC_READ has no operand; shm sizes the operation by it, so the results
	 * stand in (never read). */
	const bool no_operand = a.op == FI_ATOMIC_READ && !a.src_count;
	const fi_msg_atomic m{no_operand ? a.res : a.src, const_cast<void **>(g_null_desc),
			      no_operand ? a.res_count : a.src_count, dest, a.rma, a.rma_count, a.dt, a.op, t, 0};
	ssize_t r;
	switch (a.kind) {
	case AtomicKind::Write:
		r = fi_atomicmsg(ep_shm_, &m, flags);
		break;
	case AtomicKind::Fetch:
		r = fi_fetch_atomicmsg(ep_shm_, &m, const_cast<fi_ioc *>(a.res), const_cast<void **>(g_null_desc),
				       a.res_count, flags);
		break;
	default:
		r = fi_compare_atomicmsg(ep_shm_, &m, a.cmp, const_cast<void **>(g_null_desc), a.cmp_count,
					 const_cast<fi_ioc *>(a.res), const_cast<void **>(g_null_desc), a.res_count,
					 flags);
		break;
	}
	if (!r)
		stats_.atomics++;
	return posted(t, r);
}

void ShmPath::tx_done(TxShm *t, int err, uint32_t prov_errno)
{
	ep_.count(t->cntr, !err);
	if (err) {
		if (t->context || t->completion)
			ep_.report_error(ep_.tx_cq, t->context, t->flags, err, prov_errno,
					 std::string("a same-host ") +
						 (t->flags & FI_ATOMIC ? "atomic"
						  : t->flags & FI_RMA  ? "RMA"
								       : "send") +
						 " through shm failed: " +
						 (prov_errno == uint32_t(EfaStatus::PEER_KEY_REFUSED)
							  ? efa_status_msg(prov_errno)
							  : fi_strerror(err)));
	} else if (t->completion && ep_.tx_cq) {
		fi_cq_tagged_entry e{};
		e.op_context = t->context;
		e.flags = t->flags;
		ep_.tx_cq->push(e, FI_ADDR_NOTAVAIL);
	}
	txs_.put(t);
}

/* ------------------------------------------------------------------ registrations, remote events */

const void *ShmPath::peer_keys(fi_addr_t dest)
{
	if (dest >= peer_keys_.size())
		peer_keys_.resize(dest + 1, nullptr);
	const void *&t = peer_keys_[dest];
	if (!t) {
		const fi_addr_t a = dest < from_shm_.size() ? from_shm_[dest] : FI_ADDR_NOTAVAIL;
		const AvEntry *e = a == FI_ADDR_NOTAVAIL ? nullptr : ep_.av->lookup(a);
		const void *p = e ? map_key_table(key_table_name(shm_name(e->addr)), false) : nullptr;
		if (p && static_cast<const KeyTable *>(p)->magic != kKeyMagic) {
			munmap(const_cast<void *>(p), sizeof(KeyTable));
			p = nullptr;
		}
		t = p ? p : MAP_FAILED;
	}
	if (t == MAP_FAILED || ld(static_cast<const KeyTable *>(t)->full))
		return nullptr;
	return t;
}

bool ShmPath::remote_ok(fi_addr_t dest, uint64_t key, uint64_t addr, uint64_t len, uint64_t access)
{
	return key_check(*static_cast<const KeyTable *>(peer_keys(dest)), key, addr, len, access);
}

void ShmPath::refuse(TxShm *t)
{
	tx_done(t, FI_EACCES, uint32_t(EfaStatus::PEER_KEY_REFUSED));
}

int ShmPath::mirror_reg(const Mr &m)
{
	const iovec iov{reinterpret_cast<void *>(m.addr), m.len};
	fi_mr_attr attr{};
	attr.mr_iov = &iov;
	attr.iov_count = 1;
	attr.access = m.access;
	attr.requested_key = m.mr.key;
	attr.iface = FI_HMEM_SYSTEM;
	fid_mr *copy = nullptr;
	if (int r = fi_mr_regattr(domain_, &attr, 0, &copy)) {
		EFA_WARN(Mr, "registering key %#lx with shm (for same-host peers) failed: %s",
			 (unsigned long)m.mr.key, fi_strerror(-r));
		return r;
	}
	mrs_[&m] = copy;
	if (keys_ && !ld(static_cast<KeyTable *>(keys_)->full) && !key_add(*static_cast<KeyTable *>(keys_), m)) {
		st(static_cast<KeyTable *>(keys_)->full, 1u);
		EFA_WARN(Mr, "more than %u registrations: same-host peers' RMA and atomics to this endpoint go "
			 "through the device from now on", kKeyMax);
	}
	return 0;
}

void ShmPath::mirror_dereg(const Mr &m)
{
	auto it = mrs_.find(&m);
	if (it == mrs_.end())
		return;
	/* Unpublished first: an initiator that checks from now on is refused. */
	if (keys_)
		key_remove(*static_cast<KeyTable *>(keys_), m.mr.key);
	fi_close(&it->second->fid);
	mrs_.erase(it);
}

int ShmPath::open_remote_counters()
{
	static constexpr CntrIdx kIdx[2] = {kCntrRemoteWrite, kCntrRemoteRead};
	static constexpr uint64_t kBind[2] = {FI_REMOTE_WRITE, FI_REMOTE_READ};
	for (int i = 0; i < 2; i++) {
		if (!ep_.cntr[kIdx[i]])
			continue;
		fi_cntr_attr ca{};
		ca.events = FI_CNTR_EVENTS_COMP;
		if (int r = fi_cntr_open(domain_, &ca, &rem_cntr_[i], nullptr))
			return r;
		if (int r = fi_ep_bind(ep_shm_, &rem_cntr_[i]->fid, kBind[i]))
			return r;
	}
	return 0;
}

void ShmPath::read_remote_counters()
{
	static constexpr CntrIdx kIdx[2] = {kCntrRemoteWrite, kCntrRemoteRead};
	for (int i = 0; i < 2; i++) {
		if (!rem_cntr_[i])
			continue;
		const uint64_t v = fi_cntr_read(rem_cntr_[i]);
		for (; rem_seen_[i] < v; rem_seen_[i]++)
			ep_.count(kIdx[i], true);
	}
}

void ShmPath::remote_event(const fi_cq_tagged_entry &c, fi_addr_t src, int err)
{
	/* A same-host peer's write with CQ data (its count comes from shm's counter). */
	if (err) {
		EFA_WARN(EpData, "a same-host peer's RMA into this endpoint failed in shm: %s", fi_strerror(err));
		ep_.count(kCntrRemoteWrite, false);
		return;
	}
	if (!(c.flags & FI_REMOTE_CQ_DATA) || !ep_.rx_cq)
		return;
	fi_cq_tagged_entry e{};
	e.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
	e.data = c.data;
	ep_.rx_cq->push(e, src < from_shm_.size() ? from_shm_[src] : FI_ADDR_NOTAVAIL);
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
	/* shm cannot name the sender yet: when its address waits in our inbox, shm keeps
	 * the message (1.17 retries a command refused with -FI_EAGAIN) until progress has
	 * inserted it (shm.h, "Senders"). */
	if (addr == FI_ADDR_NOTAVAIL && inbox_ && announcement_waiting()) {
		inbox_dirty_ = true;
		stats_.deferred++;
		return -FI_EAGAIN;
	}
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
	/* Most messages find their receive: shm copies into it, and its completion names
	 * the receive (a taken() context). libfabric 1.17 tells a tagged message's length
	 * only in the completion: one that may not fit takes the sink. */
	if (RxOp *r = ep_.rx.shm_take(tagged, src, tag, size, sink_room())) {
		stats_.recvs++;
		r->shm_sink = fill(e, *r, tagged || size > r->cap);
		*out = &e;
		return 0;
	}
	MsgRx *m = ep_.rx.shm_arrival(tagged, src, tag, size, &e);
	if (!m) {
		entries_.put(x);
		EFA_WARN_ONCE(EpData, "a same-host message found no free message entry; raise rx_attr->size");
		return -FI_ENOMEM;
	}
	m->shm_src = addr;
	stats_.recvs++;
	*out = &e;
	if (m->bound) {
		if (!through_pull(*m)) {
			m->sink = fill(e, *m, m->dst, m->dst_count, m->tagged || m->msg_len > m->cap);
			return 0;
		}
		/* Its receive has no iov left for the sink: shm keeps it, and it is pulled
		 * into our memory, then copied into the receive (queue()). */
		m->shm_sent = false;
	}
	e.owner_context = m; /* until bound: queue() and free_entry() find it */
	return -FI_ENOENT;
}

bool ShmPath::through_pull(const MsgRx &m) const
{
	return (m.tagged || m.msg_len > m.cap) && m.dst_count >= sink_room();
}

int ShmPath::queue(fi_peer_rx_entry *e)
{
	ShmPath *path = srx_of(e->srx)->path;
	MsgRx *m = static_cast<MsgRx *>(e->owner_context);
	if (m->bound) { /* arrival(): to be pulled for its receive */
		m->pull_queued = true;
		path->pulls_.push_back(m);
		return 0;
	}
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
	m.shm = nullptr;
	return fill_entry(e, m.tagged, &m, iov, count, with_sink);
}

bool ShmPath::fill(fi_peer_rx_entry &e, RxOp &r, bool with_sink)
{
	return fill_entry(e, r.tagged, taken_context(&r), r.iov, r.iov_count, with_sink);
}

bool ShmPath::fill_entry(fi_peer_rx_entry &e, bool tagged, void *context, const iovec *iov, size_t count,
			 bool with_sink)
{
	e.owner_context = nullptr; /* shm's from here: it frees the entry when done */
	Entry &x = reinterpret_cast<Entry &>(e);
	std::copy(iov, iov + count, x.iov);
	e.iov = x.iov;
	e.count = count;
	/* One that may not fit takes the sink as its last iov (the top of shm.h). */
	bool sunk = false;
	if (with_sink && count < sink_room()) {
		if (void *s = sink()) {
			x.iov[e.count++] = iovec{s, kSinkSize};
			sunk = true;
		}
	}
	e.desc = const_cast<void **>(g_null_desc);
	e.context = context; /* shm's completion names the message or the receive */
	e.flags = FI_COMPLETION | FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
	return sunk;
}

int ShmPath::copy(fi_peer_rx_entry &e, bool tagged)
{
	return tagged ? srx_.srx.peer_ops->start_tag(&e) : srx_.srx.peer_ops->start_msg(&e);
}

int ShmPath::start(MsgRx &m)
{
	if (through_pull(m)) {
		/* No iov left for the sink: it stays queued for its pull (advance() calls
		 * this only before the pull began), which delivers it. */
		m.shm_sent = false;
		return 0;
	}
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
	/* Senders that announced themselves, then those inserted since the last look. */
	if (inbox_ && (inbox_dirty_ || inbox::rung(*inbox_) != inbox_rung_))
		take_announcements();
	if (av_count() != scanned_)
		sync();
	fi_cq_tagged_entry c[16];
	fi_addr_t from[16];
	for (;;) {
		const ssize_t n = fi_cq_readfrom(rx_cq_, c, 16, from);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++) {
				if (!c[i].op_context) { /* not a message: a peer's RMA */
					remote_event(c[i], from[i], 0);
					continue;
				}
				if (RxOp *r = taken(c[i].op_context)) {
					if (r->shm_sink && c[i].len > r->cap)
						sink_release(c[i].len - r->cap);
					ep_.rx.shm_taken_done(r, c[i].len, c[i].data, c[i].flags & FI_REMOTE_CQ_DATA, 0);
					continue;
				}
				MsgRx &m = *static_cast<MsgRx *>(c[i].op_context);
				if (m.sink && c[i].len > m.cap)
					sink_release(c[i].len - m.cap);
				rx_completion(m, c[i].len, 0, c[i].data, c[i].flags & FI_REMOTE_CQ_DATA, 0);
			}
			/* A short batch emptied the CQ: another read would only run shm's
			 * progress again (an error entry waits for the next pass). */
			if (n == 16)
				continue;
		}
		if (n == -FI_EAVAIL) {
			fi_cq_err_entry ee{};
			if (fi_cq_readerr(rx_cq_, &ee, 0) != 1)
				break;
			/* libfabric 1.17's shm reports some errors negated (its truncation). */
			const int err = ee.err < 0 ? -ee.err : ee.err;
			if (!ee.op_context) {
				remote_event(fi_cq_tagged_entry{}, FI_ADDR_NOTAVAIL, err);
				continue;
			}
			RxOp *r = taken(ee.op_context);
			MsgRx *m = r ? nullptr : static_cast<MsgRx *>(ee.op_context);
			const uint64_t cap = r ? r->cap : m->cap;
			const bool sunk = r ? r->shm_sink : m->sink;
			/* shm told an untagged message's length on arrival */
			const uint64_t told = r ? (r->tagged ? 0 : r->shm_len) : (m->tagged ? 0 : m->msg_len);
			uint64_t len = ee.len, olen = ee.olen;
			if (err == FI_ETRUNC && len + olen <= cap) {
				/* It did not fit even with the sink, or had no sink: its length is
				 * lost (shm says neither), at least this much. */
				len = cap;
				olen = sunk ? kSinkSize : (told > cap ? told - cap : 0);
				EFA_WARN_ONCE(EpData, "shm truncated a same-host message without saying its length "
					      "(more than the 1 GiB truncation sink beyond the receive, or no sink "
					      "could be reserved); FI_ETRUNC reports olen %lu", (unsigned long)olen);
			}
			if (sunk)
				sink_release(kSinkSize);
			EFA_DBG(EpData, "shm receive error: %s (len %zu, olen %zu)", fi_strerror(err), ee.len, ee.olen);
			if (r)
				ep_.rx.shm_taken_done(r, len + olen, ee.data, ee.flags & FI_REMOTE_CQ_DATA, err);
			else
				rx_completion(*m, len, olen, ee.data, ee.flags & FI_REMOTE_CQ_DATA, err);
			continue;
		}
		/* A message from a sender whose announcement shm read before us: again, once
		 * it is inserted. */
		if (inbox_dirty_) {
			take_announcements();
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
	if (rem_cntr_[0] || rem_cntr_[1])
		read_remote_counters();
	/* Reading the receive CQ ran shm's progress; its transmit CQ holds completions
	 * only while operations are out. */
	while (txs_.in_use()) {
		const ssize_t n = fi_cq_read(tx_cq_, c, 16);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				tx_done(static_cast<TxShm *>(c[i].op_context), 0, 0);
			if (n == 16)
				continue;
			break;
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

bool ShmPath::wanted(uint64_t) { return false; }
const void *ShmPath::peer_keys(fi_addr_t) { return nullptr; }

/* Never reached: open() makes none. */
ShmPath::~ShmPath() = default;
int ShmPath::init() { return -FI_ENOSYS; }
size_t ShmPath::av_count() const { return 0; }
bool ShmPath::valid(fi_addr_t) const { return false; }
void ShmPath::sync() {}
ssize_t ShmPath::send(const SendArgs &, fi_addr_t) { return -FI_ENOSYS; }
ssize_t ShmPath::rma(const RmaArgs &, uint64_t, fi_addr_t) { return -FI_ENOSYS; }
ssize_t ShmPath::atomic(const AtomicArgs &, fi_addr_t) { return -FI_ENOSYS; }
size_t ShmPath::atomic_count(AtomicKind, fi_datatype, fi_op) { return 0; }
int ShmPath::mirror_reg(const Mr &) { return 0; }
void ShmPath::mirror_dereg(const Mr &) {}
void ShmPath::progress() {}
int ShmPath::start(MsgRx &) { return -FI_ENOSYS; }
void ShmPath::discard(MsgRx &) {}

#endif

} // namespace efa::rdm
