/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Device-level verbs of the software EFA device: device list, context, queries, PD, MR,
 * AH, completion channels and async events. Exported with rdma-core's names and C ABI.
 *
 * Every op of the context's ibv_context_ops / verbs_context is set, to a real
 * implementation or to a stub that fails with EOPNOTSUPP, because verbs.h inlines and
 * rdma-core's own exported functions reach the device through them.
 */
#include "sim.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <climits>
#include <map>
#include <mutex>
#include <new>
#include <string>

namespace efasim {

namespace {

DeviceEntry g_devices[16];
constexpr long kMaxCompVectors = 64; /* event queues this device offers */
std::once_flag g_devices_once;

/* ---- the device's sysfs tree
 *
 * rdma-core describes a device by two sysfs directories (ibv_device.dev_path under
 * class/infiniband_verbs, ibdev_path under class/infiniband), and software reads them:
 * upstream's EFA provider reads SYSFS_PATH/class/infiniband_verbs/abi_version and
 * resolves ibdev_path/device (the PCI function, whose name it parses as a PCI address)
 * and ibdev_path/device/driver (the driver's name). The software device has no kernel
 * module, so it keeps a tree of the same shape in a directory of its own and points the
 * paths there:
 *
 *   ROOT/class/infiniband_verbs/abi_version            6 (the uverbs ABI)
 *   ROOT/class/infiniband_verbs/uverbs-efasimN/        ibdev, abi_version (EFA: 1)
 *   ROOT/class/infiniband/efasimN/device  -> ROOT/devices/pci0000:00/0000:00:1N.0
 *   ROOT/class/infiniband/efasimN/node_guid
 *   ROOT/devices/pci0000:00/0000:00:1N.0/driver -> ROOT/bus/pci/drivers/efa
 *   ROOT/devices/pci0000:00/0000:00:1N.0/{vendor,device}  0x1d0f, 0xefa2
 *
 * ROOT is EFASIM_SYSFS_DIR, or ${TMPDIR:-/tmp}/efasim-sysfs-UID. Programs that read the
 * sysfs root itself take it from SYSFS_PATH, as rdma-core does (efasim(7)). Every
 * process writes the same content (files by rename, links replaced only when they
 * differ), so concurrent processes agree. If the tree cannot be written the paths keep
 * their /sys names, which then do not exist. */
std::string sysfs_root()
{
	if (const char *d = getenv("EFASIM_SYSFS_DIR"); d && *d)
		return d;
	const char *t = getenv("TMPDIR");
	return std::string(t && *t ? t : "/tmp") + "/efasim-sysfs-" + std::to_string(getuid());
}

bool mkdirs(const std::string &path)
{
	for (size_t i = 1; i <= path.size(); i++) {
		if (i < path.size() && path[i] != '/')
			continue;
		std::string part = path.substr(0, i);
		if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
			return false;
	}
	return true;
}

bool put_file(const std::string &path, const std::string &content)
{
	std::string tmp = path + ".tmp." + std::to_string(getpid());
	int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return false;
	bool ok = write(fd, content.data(), content.size()) == ssize_t(content.size());
	ok = close(fd) == 0 && ok;
	ok = ok && rename(tmp.c_str(), path.c_str()) == 0;
	if (!ok)
		unlink(tmp.c_str());
	return ok;
}

bool put_link(const std::string &path, const std::string &target)
{
	char cur[PATH_MAX];
	ssize_t n = readlink(path.c_str(), cur, sizeof cur - 1);
	if (n >= 0 && std::string(cur, size_t(n)) == target)
		return true;
	std::string tmp = path + ".tmp." + std::to_string(getpid());
	unlink(tmp.c_str());
	return symlink(target.c_str(), tmp.c_str()) == 0 && rename(tmp.c_str(), path.c_str()) == 0;
}

bool make_sysfs(const std::string &root, int n)
{
	const std::string verbs = root + "/class/infiniband_verbs", ib = root + "/class/infiniband",
			  driver = root + "/bus/pci/drivers/efa", pci = root + "/devices/pci0000:00";
	if (root.size() + 64 >= IBV_SYSFS_PATH_MAX) {
		errno = ENAMETOOLONG; /* ibdev_path would not fit */
		return false;
	}
	if (!mkdirs(verbs) || !mkdirs(ib) || !mkdirs(driver) || !mkdirs(pci) ||
	    !put_file(verbs + "/abi_version", "6\n"))
		return false;
	for (int i = 0; i < n; i++) {
		char fn[32];
		snprintf(fn, sizeof fn, "0000:00:%02x.0", 0x10 + i);
		const std::string name = "efasim" + std::to_string(i), func = pci + "/" + fn,
				  uverbs = verbs + "/uverbs-" + name, dev = ib + "/" + name;
		char guid[32];
		snprintf(guid, sizeof guid, "0200:efa5:e000:%04x\n", i);
		if (!mkdirs(func) || !mkdirs(uverbs) || !mkdirs(dev) || !put_file(func + "/vendor", "0x1d0f\n") ||
		    !put_file(func + "/device", "0xefa2\n") || !put_link(func + "/driver", driver) ||
		    !put_file(uverbs + "/ibdev", name + "\n") || !put_file(uverbs + "/abi_version", "1\n") ||
		    !put_file(dev + "/node_guid", guid) || !put_link(dev + "/device", func))
			return false;
	}
	return true;
}

void init_devices()
{
	const Config &c = config();
	const std::string root = sysfs_root();
	const bool tree = make_sysfs(root, c.num_devices);
	if (!tree)
		SIM_WARN("cannot write the device's sysfs tree under %s (%s): ibdev_path names /sys, where the "
			 "device does not appear; set EFASIM_SYSFS_DIR to a writable directory",
			 root.c_str(), strerror(errno));
	const std::string base = tree ? root : std::string("/sys");
	for (int i = 0; i < c.num_devices; i++) {
		DeviceEntry &d = g_devices[i];
		std::memset(&d.dev, 0, sizeof d.dev);
		d.index = i;
		d.dev.node_type = IBV_NODE_UNSPECIFIED;
		d.dev.transport_type = IBV_TRANSPORT_UNSPECIFIED;
		snprintf(d.dev.name, sizeof d.dev.name, "efasim%d", i);
		snprintf(d.dev.dev_name, sizeof d.dev.dev_name, "uverbs-efasim%d", i);
		snprintf(d.dev.dev_path, sizeof d.dev.dev_path, "%s/class/infiniband_verbs/uverbs-efasim%d",
			 base.c_str(), i);
		snprintf(d.dev.ibdev_path, sizeof d.dev.ibdev_path, "%s/class/infiniband/efasim%d", base.c_str(), i);
	}
}

/* Completion vectors: the EFA driver creates one event queue per online CPU, up to what
 * the device offers, and reports their number as num_comp_vectors (at least 1). */
int comp_vectors()
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return int(std::clamp<long>(cpus, 1, kMaxCompVectors));
}

DeviceEntry *entry_of(ibv_device *dev)
{
	for (auto &d : g_devices)
		if (&d.dev == dev)
			return &d;
	return nullptr;
}

/* ---- stubs for ops the device does not implement */
template <typename R, typename... A> R enosys_ptr(A...)
{
	errno = EOPNOTSUPP;
	return nullptr;
}
template <typename... A> int enosys_int(A...) { return EOPNOTSUPP; }
void *compat_null() { return nullptr; }

} // namespace

Context *Context::from(ibv_context *c)
{
	auto *v = reinterpret_cast<verbs_context *>(reinterpret_cast<uint8_t *>(c) - offsetof(verbs_context, context));
	return reinterpret_cast<Context *>(v);
}

void fill_device_attr(ibv_device_attr &a, int index)
{
	const Config &c = config();
	std::memset(&a, 0, sizeof a);
	snprintf(a.fw_ver, sizeof a.fw_ver, "0.1.0 efasim");
	uint64_t guid = 0x0200efa5e0000000ull | uint64_t(index);
	a.node_guid = htobe64(guid);
	a.sys_image_guid = htobe64(guid);
	a.max_mr_size = 1ull << 40;
	a.page_size_cap = 4096 | (2u << 20);
	a.vendor_id = 0x1d0f;
	a.vendor_part_id = c.profile->vendor_part_id;
	a.hw_ver = 1;
	a.max_qp = int(c.max_qp);
	a.max_qp_wr = int(c.profile->max_sq_wr);
	a.max_sge = 2;
	a.max_sge_rd = 1;
	a.max_cq = 4096;
	a.max_cqe = 1 << 22;
	a.max_mr = int(c.max_mr);
	a.max_pd = 1024;
	a.max_ah = 1 << 16;
	a.max_pkeys = 1;
	a.phys_port_cnt = 1;
	a.atomic_cap = IBV_ATOMIC_NONE;
}

void fill_port_attr(ibv_port_attr &a)
{
	std::memset(&a, 0, sizeof a);
	a.state = IBV_PORT_ACTIVE;
	a.max_mtu = IBV_MTU_4096;
	a.active_mtu = IBV_MTU_4096;
	a.gid_tbl_len = 1;
	a.max_msg_sz = config().mtu;
	a.pkey_tbl_len = 1;
	a.lid = 0;
	a.active_width = 2; /* 4x */
	a.active_speed = 32; /* EDR: 4 x 25 Gb/s = 100 Gb/s */
	a.phys_state = 5;    /* LinkUp */
	a.link_layer = IBV_LINK_LAYER_UNSPECIFIED;
}

void fill_efadv_attr(efadv_device_attr_cur &a)
{
	const Config &c = config();
	std::memset(&a, 0, sizeof a);
	a.max_sq_wr = c.profile->max_sq_wr;
	a.max_rq_wr = c.profile->max_rq_wr;
	a.max_sq_sge = 2;
	a.max_rq_sge = 2;
	a.inline_buf_size = c.profile->inline_buf_size;
	a.inline_buf_size_ex = c.profile->inline_buf_size_ex;
	a.device_caps = c.profile->device_caps;
	a.max_rdma_size = (c.profile->device_caps & (EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE))
				  ? c.max_rdma_size
				  : 0;
}

uint32_t max_sq_depth(const Profile &p, bool inline_write, uint32_t max_inline)
{
	const bool wide = inline_write || max_inline > p.inline_buf_size;
	return wide ? p.max_sq_wr / 2 : p.max_sq_wr;
}

uint32_t max_rq_depth(const Profile &p, uint32_t max_recv_sge)
{
	uint32_t n = p.max_rq_wr / std::max<uint32_t>(max_recv_sge, 1);
	uint32_t pow2 = 1;
	while (pow2 * 2 <= n)
		pow2 *= 2;
	return n ? pow2 : 0;
}

Mr *Runtime::mr_lookup(uint32_t key)
{
	auto it = mrs.find(key);
	return it == mrs.end() ? nullptr : it->second;
}

bool Runtime::pd_has_ah(Pd *pd, const Gid &gid, uint16_t *ahn)
{
	auto it = pd->ah_by_gid.find(gid);
	if (it == pd->ah_by_gid.end())
		return false;
	if (ahn)
		*ahn = it->second.ahn;
	return true;
}

bool sge_valid(Runtime *rt, Pd *pd, const Sge &s, int need_access)
{
	Mr *m = rt->mr_lookup(s.lkey);
	if (!m || m->pd != pd || (need_access && !(m->access & need_access)))
		return false;
	uint64_t base = reinterpret_cast<uint64_t>(m->mr.addr);
	return s.addr >= base && s.addr - base <= m->mr.length && s.length <= m->mr.length - (s.addr - base);
}

Context *Context::checked(ibv_context *c)
{
	if (!c || c->abi_compat != __VERBS_ABI_IS_EXTENDED)
		return nullptr;
	Context *ctx = from(c);
	return ctx->magic == kMagic ? ctx : nullptr;
}

/* ------------------------------------------------------------------ context ops */
int ops::query_port(ibv_context *, uint8_t port, ibv_port_attr *attr, size_t len)
{
	if (port != 1)
		return EINVAL;
	ibv_port_attr a;
	fill_port_attr(a);
	std::memset(attr, 0, len);
	std::memcpy(attr, &a, std::min(len, sizeof a));
	return 0;
}

int ops::query_device_ex(ibv_context *ctx, const ibv_query_device_ex_input *in, ibv_device_attr_ex *attr,
			 size_t len)
{
	if (in && in->comp_mask)
		return EINVAL;
	if (len < sizeof(ibv_device_attr))
		return EINVAL;
	ibv_device_attr_ex a{};
	fill_device_attr(a.orig_attr, Context::from(ctx)->rt->index);
	a.phys_port_cnt_ex = 1;
	std::memset(attr, 0, len);
	std::memcpy(attr, &a, std::min(len, sizeof a));
	return 0;
}

/*
 * Fork support as rdma-core has it. On a kernel that copies registered pages on fork
 * (Linux 5.13+, EFASIM_COPY_ON_FORK=1, the default) none is needed: ibv_fork_init()
 * succeeds and changes nothing, ibv_is_fork_initialized() answers IBV_FORK_UNNEEDED. On
 * an older kernel (EFASIM_COPY_ON_FORK=0) ibv_fork_init(), or RDMAV_FORK_SAFE /
 * IBV_FORK_SAFE at the first ibv_get_device_list(), turns it on unless a registration
 * came first (EINVAL, "too late"); from then on every registered page is MADV_DONTFORK
 * while a registration covers it (a forked child does not have those pages), and
 * ibv_is_fork_initialized() answers IBV_FORK_ENABLED, IBV_FORK_DISABLED before.
 */
namespace fork_support {

std::mutex g_lock;
bool g_enabled = false, g_too_late = false;
std::map<uintptr_t, uint32_t> g_pages; /* page address -> registrations covering it */

int init()
{
	if (config().copy_on_fork)
		return 0;
	std::lock_guard<std::mutex> g(g_lock);
	if (g_enabled)
		return 0;
	if (g_too_late)
		return EINVAL;
	g_enabled = true;
	return 0;
}

ibv_fork_status status()
{
	if (config().copy_on_fork)
		return IBV_FORK_UNNEEDED;
	std::lock_guard<std::mutex> g(g_lock);
	return g_enabled ? IBV_FORK_ENABLED : IBV_FORK_DISABLED;
}

/* Counts the registration of [addr, addr + len) up (`add`) or down, and marks each run
 * of pages whose count leaves or reaches zero. 0 or the errno of madvise. */
int account(const void *addr, size_t len, bool add)
{
	if (config().copy_on_fork || !len)
		return 0;
	std::lock_guard<std::mutex> g(g_lock);
	if (!g_enabled) {
		g_too_late = true;
		return 0;
	}
	const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
	const uintptr_t first = reinterpret_cast<uintptr_t>(addr) & ~(page - 1);
	const uintptr_t end = (reinterpret_cast<uintptr_t>(addr) + len + page - 1) & ~(page - 1);
	uintptr_t run = 0, run_len = 0;
	int err = 0;
	auto flush = [&] {
		if (run_len && madvise(reinterpret_cast<void *>(run), run_len, add ? MADV_DONTFORK : MADV_DOFORK))
			err = errno;
		run_len = 0;
	};
	for (uintptr_t p = first; p < end; p += page) {
		bool edge;
		if (add) {
			edge = ++g_pages[p] == 1;
		} else {
			auto it = g_pages.find(p);
			edge = it != g_pages.end() && --it->second == 0;
			if (edge)
				g_pages.erase(it);
		}
		if (edge && run_len && run + run_len == p) {
			run_len += page;
		} else if (edge) {
			flush();
			run = p;
			run_len = page;
		}
	}
	flush();
	return err;
}

} // namespace fork_support

} // namespace efasim

using namespace efasim;

/* ================================================================== exported */

EFASIM_EXPORT ibv_device **ibv_get_device_list(int *num)
{
	std::call_once(g_devices_once, init_devices);
	static std::once_flag fork_env;
	std::call_once(fork_env, [] {
		if ((getenv("RDMAV_FORK_SAFE") || getenv("IBV_FORK_SAFE")) && fork_support::init())
			SIM_WARN("fork()-safety requested but init failed");
	});
	const Config &c = config();
	int n = c.error.empty() ? c.num_devices : 0;
	auto **list = static_cast<ibv_device **>(calloc(size_t(n) + 1, sizeof(ibv_device *)));
	if (!list) {
		errno = ENOMEM;
		return nullptr;
	}
	for (int i = 0; i < n; i++)
		list[i] = &g_devices[i].dev;
	if (num)
		*num = n;
	return list;
}

EFASIM_EXPORT void ibv_free_device_list(ibv_device **list) { free(list); }

EFASIM_EXPORT const char *ibv_get_device_name(ibv_device *dev) { return dev ? dev->name : nullptr; }

EFASIM_EXPORT __be64 ibv_get_device_guid(ibv_device *dev)
{
	DeviceEntry *e = entry_of(dev);
	return htobe64(0x0200efa5e0000000ull | uint64_t(e ? e->index : 0));
}

EFASIM_EXPORT int ibv_get_device_index(ibv_device *dev)
{
	DeviceEntry *e = entry_of(dev);
	return e ? e->index : -1;
}

EFASIM_EXPORT ibv_context *ibv_open_device(ibv_device *dev)
{
	DeviceEntry *e = entry_of(dev);
	if (!e || e->index >= config().num_devices || !config().error.empty()) {
		errno = ENODEV;
		return nullptr;
	}
	auto *ctx = new (std::nothrow) Context();
	if (!ctx) {
		errno = ENOMEM;
		return nullptr;
	}
	std::memset(&ctx->vctx, 0, sizeof ctx->vctx);
	ctx->rt = Runtime::acquire(e->index);
	if (!ctx->rt) {
		int err = errno;
		delete ctx;
		errno = err;
		return nullptr;
	}
	ctx->async_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ctx->magic = Context::kMagic;

	verbs_context &v = ctx->vctx;
	ibv_context &c = v.context;
	c.device = dev;
	c.cmd_fd = -1;
	c.async_fd = ctx->async_fd;
	c.num_comp_vectors = comp_vectors();
	pthread_mutex_init(&c.mutex, nullptr);
	c.abi_compat = __VERBS_ABI_IS_EXTENDED;
	v.sz = sizeof(verbs_context);

	ibv_context_ops &o = c.ops;
	o._compat_query_device = [](ibv_context *cx, ibv_device_attr *a) {
		fill_device_attr(*a, Context::from(cx)->rt->index);
		return 0;
	};
	o._compat_query_port = [](ibv_context *, uint8_t, _compat_ibv_port_attr *) { return EOPNOTSUPP; };
	o._compat_alloc_pd = o._compat_dealloc_pd = o._compat_reg_mr = o._compat_rereg_mr =
		o._compat_dereg_mr = o._compat_create_cq = o._compat_cq_event = o._compat_resize_cq =
			o._compat_destroy_cq = o._compat_create_srq = o._compat_modify_srq =
				o._compat_query_srq = o._compat_destroy_srq = o._compat_create_qp =
					o._compat_query_qp = o._compat_modify_qp = o._compat_destroy_qp =
						o._compat_create_ah = o._compat_destroy_ah =
							o._compat_attach_mcast = o._compat_detach_mcast =
								o._compat_async_event = compat_null;
	o.alloc_mw = enosys_ptr<ibv_mw *, ibv_pd *, ibv_mw_type>;
	o.bind_mw = enosys_int<ibv_qp *, ibv_mw *, ibv_mw_bind *>;
	o.dealloc_mw = enosys_int<ibv_mw *>;
	o.poll_cq = ops::poll_cq;
	o.req_notify_cq = ops::req_notify_cq;
	o.post_srq_recv = enosys_int<ibv_srq *, ibv_recv_wr *, ibv_recv_wr **>;
	o.post_send = ops::post_send;
	o.post_recv = ops::post_recv;

	v.query_port = ops::query_port;
	v.advise_mr = enosys_int<ibv_pd *, ibv_advise_mr_advice, uint32_t, ibv_sge *, uint32_t>;
	v.alloc_null_mr = enosys_ptr<ibv_mr *, ibv_pd *>;
	v.read_counters = enosys_int<ibv_counters *, uint64_t *, uint32_t, uint32_t>;
	v.attach_counters_point_flow = enosys_int<ibv_counters *, ibv_counter_attach_attr *, ibv_flow *>;
	v.create_counters = enosys_ptr<ibv_counters *, ibv_context *, ibv_counters_init_attr *>;
	v.destroy_counters = enosys_int<ibv_counters *>;
	v.reg_dm_mr = enosys_ptr<ibv_mr *, ibv_pd *, ibv_dm *, uint64_t, size_t, unsigned int>;
	v.alloc_dm = enosys_ptr<ibv_dm *, ibv_context *, ibv_alloc_dm_attr *>;
	v.free_dm = enosys_int<ibv_dm *>;
	v.modify_flow_action_esp = enosys_int<ibv_flow_action *, ibv_flow_action_esp_attr *>;
	v.destroy_flow_action = enosys_int<ibv_flow_action *>;
	v.create_flow_action_esp = enosys_ptr<ibv_flow_action *, ibv_context *, ibv_flow_action_esp_attr *>;
	v.modify_qp_rate_limit = enosys_int<ibv_qp *, ibv_qp_rate_limit_attr *>;
	v.alloc_parent_domain = enosys_ptr<ibv_pd *, ibv_context *, ibv_parent_domain_init_attr *>;
	v.dealloc_td = enosys_int<ibv_td *>;
	v.alloc_td = enosys_ptr<ibv_td *, ibv_context *, ibv_td_init_attr *>;
	v.modify_cq = enosys_int<ibv_cq *, ibv_modify_cq_attr *>;
	v.post_srq_ops = enosys_int<ibv_srq *, ibv_ops_wr *, ibv_ops_wr **>;
	v.destroy_rwq_ind_table = enosys_int<ibv_rwq_ind_table *>;
	v.create_rwq_ind_table = enosys_ptr<ibv_rwq_ind_table *, ibv_context *, ibv_rwq_ind_table_init_attr *>;
	v.destroy_wq = enosys_int<ibv_wq *>;
	v.modify_wq = enosys_int<ibv_wq *, ibv_wq_attr *>;
	v.create_wq = enosys_ptr<ibv_wq *, ibv_context *, ibv_wq_init_attr *>;
	v.query_rt_values = enosys_int<ibv_context *, ibv_values_ex *>;
	v.create_cq_ex = ops::create_cq_ex;
	v.query_device_ex = ops::query_device_ex;
	v.ibv_destroy_flow = enosys_int<ibv_flow *>;
	v.ibv_create_flow = enosys_ptr<ibv_flow *, ibv_qp *, ibv_flow_attr *>;
	v.open_qp = enosys_ptr<ibv_qp *, ibv_context *, ibv_qp_open_attr *>;
	v.create_qp_ex = ops::create_qp_ex;
	v.get_srq_num = enosys_int<ibv_srq *, uint32_t *>;
	v.create_srq_ex = enosys_ptr<ibv_srq *, ibv_context *, ibv_srq_init_attr_ex *>;
	v.open_xrcd = enosys_ptr<ibv_xrcd *, ibv_context *, ibv_xrcd_init_attr *>;
	v.close_xrcd = enosys_int<ibv_xrcd *>;
	return &c;
}

EFASIM_EXPORT int ibv_close_device(ibv_context *c)
{
	if (!c)
		return EINVAL;
	Context *ctx = Context::from(c);
	ctx->magic = 0;
	Runtime::release(ctx->rt);
	if (ctx->async_fd >= 0)
		close(ctx->async_fd);
	pthread_mutex_destroy(&c->mutex);
	delete ctx;
	return 0;
}

EFASIM_EXPORT int ibv_query_device(ibv_context *c, ibv_device_attr *attr)
{
	if (!c || !attr)
		return EINVAL;
	fill_device_attr(*attr, Context::from(c)->rt->index);
	return 0;
}

/* The exported, pre-1.2 entry point: fills the old layout (up to link_layer). */
EFASIM_EXPORT int (ibv_query_port)(ibv_context *c, uint8_t port, _compat_ibv_port_attr *attr)
{
	if (!c || !attr || port != 1)
		return EINVAL;
	ibv_port_attr a;
	fill_port_attr(a);
	std::memcpy(attr, &a, offsetof(ibv_port_attr, link_layer) + sizeof a.link_layer);
	return 0;
}

EFASIM_EXPORT int ibv_query_gid(ibv_context *c, uint8_t port, int index, ibv_gid *gid)
{
	if (!c || !gid || port != 1 || index != 0)
		return EINVAL;
	std::memcpy(gid->raw, Context::from(c)->rt->gid.raw, 16);
	return 0;
}

EFASIM_EXPORT int _ibv_query_gid_ex(ibv_context *c, uint32_t port, uint32_t index, ibv_gid_entry *entry,
				    uint32_t flags, size_t len)
{
	if (!c || !entry || port != 1 || index != 0 || flags || len < sizeof(ibv_gid_entry))
		return EINVAL;
	std::memset(entry, 0, len);
	std::memcpy(entry->gid.raw, Context::from(c)->rt->gid.raw, 16);
	entry->gid_index = 0;
	entry->port_num = 1;
	entry->gid_type = IBV_GID_TYPE_IB;
	entry->ndev_ifindex = 0;
	return 0;
}

EFASIM_EXPORT int ibv_query_pkey(ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
	if (!c || !pkey || port != 1 || index != 0)
		return EINVAL;
	*pkey = htons(0xffff);
	return 0;
}

/* ------------------------------------------------------------------ PD */
EFASIM_EXPORT ibv_pd *ibv_alloc_pd(ibv_context *c)
{
	if (!c) {
		errno = EINVAL;
		return nullptr;
	}
	auto *pd = new (std::nothrow) Pd();
	if (!pd) {
		errno = ENOMEM;
		return nullptr;
	}
	static std::atomic<uint32_t> handles{1};
	pd->pd.context = c;
	pd->pd.handle = handles++;
	pd->ctx = Context::from(c);
	return &pd->pd;
}

EFASIM_EXPORT int ibv_dealloc_pd(ibv_pd *p)
{
	if (!p)
		return EINVAL;
	Pd *pd = reinterpret_cast<Pd *>(p);
	Runtime *rt = pd->ctx->rt;
	{
		std::lock_guard<std::mutex> g(rt->lock);
		if (!pd->ah_by_gid.empty())
			return EBUSY;
		for (auto &[key, m] : rt->mrs)
			if (m->pd == pd)
				return EBUSY;
		for (auto &[n, qp] : rt->qps)
			if (qp->pd == pd)
				return EBUSY;
	}
	delete pd;
	return 0;
}

/* ------------------------------------------------------------------ MR */
namespace {

constexpr int kSupportedAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				 IBV_ACCESS_RELAXED_ORDERING;

/* Whether every page of [addr, addr + len) is mapped (mincore fails with ENOMEM on a
 * hole), looked at in chunks so that a large range needs no large vector. */
bool range_mapped(const void *addr, size_t len)
{
	static const uintptr_t ps = uintptr_t(sysconf(_SC_PAGESIZE));
	uintptr_t a = reinterpret_cast<uintptr_t>(addr) & ~(ps - 1);
	const uintptr_t end = reinterpret_cast<uintptr_t>(addr) + len;
	unsigned char vec[256];
	while (a < end) {
		const size_t n = std::min<uintptr_t>((end - a + ps - 1) / ps, sizeof vec);
		if (mincore(reinterpret_cast<void *>(a), n * ps, vec) != 0)
			return false;
		a += n * ps;
	}
	return true;
}

ibv_mr *reg_mr(ibv_pd *p, void *addr, size_t length, uint64_t iova, unsigned access)
{
	if (!p || (!addr && length)) {
		errno = EINVAL;
		return nullptr;
	}
	if (access & ~unsigned(kSupportedAccess | IBV_ACCESS_OPTIONAL_RANGE)) {
		errno = EINVAL; /* atomics, MW bind, zero-based, on-demand: not on EFA */
		return nullptr;
	}
	/* Remote write access requires local write, as in the verbs specification. */
	if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
		errno = EINVAL;
		return nullptr;
	}
	const Profile &prof = *config().profile;
	if ((access & IBV_ACCESS_REMOTE_READ) && !(prof.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ)) {
		errno = EINVAL;
		return nullptr;
	}
	if ((access & IBV_ACCESS_REMOTE_WRITE) && !(prof.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE)) {
		errno = EINVAL;
		return nullptr;
	}
	/* The kernel pins every page of the range: one that is not mapped fails the
	 * registration with EFAULT (ib_umem_get). */
	if (length && !range_mapped(addr, length)) {
		errno = EFAULT;
		return nullptr;
	}
	if (int e = fork_support::account(addr, length, true)) {
		errno = e;
		return nullptr;
	}
	Pd *pd = reinterpret_cast<Pd *>(p);
	Runtime *rt = pd->ctx->rt;
	auto *m = new (std::nothrow) Mr();
	if (!m) {
		fork_support::account(addr, length, false);
		errno = ENOMEM;
		return nullptr;
	}
	m->pd = pd;
	m->iova = iova;
	m->access = int(access & kSupportedAccess);
	m->mr.context = p->context;
	m->mr.pd = p;
	m->mr.addr = addr;
	m->mr.length = length;
	std::lock_guard<std::mutex> g(rt->lock);
	if (rt->mrs.size() >= config().max_mr) {
		delete m;
		fork_support::account(addr, length, false);
		errno = ENOMEM;
		return nullptr;
	}
	uint32_t key = rt->next_mr_key;
	while (key == 0 || rt->mrs.count(key))
		key++; /* after 2^32 registrations: the next key not registered now */
	rt->next_mr_key = key + 1;
	rt->mrs.emplace(key, m);
	m->mr.handle = key;
	m->mr.lkey = key;
	m->mr.rkey = key;
	return &m->mr;
}

} // namespace

EFASIM_EXPORT ibv_mr *(ibv_reg_mr)(ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg_mr(pd, addr, length, reinterpret_cast<uintptr_t>(addr), unsigned(access));
}

EFASIM_EXPORT ibv_mr *(ibv_reg_mr_iova)(ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return reg_mr(pd, addr, length, iova, unsigned(access));
}

EFASIM_EXPORT ibv_mr *ibv_reg_mr_iova2(ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	return reg_mr(pd, addr, length, iova, access);
}

EFASIM_EXPORT ibv_mr *ibv_reg_dmabuf_mr(ibv_pd *, uint64_t, size_t, uint64_t, int, int)
{
	errno = EOPNOTSUPP; /* no device memory on the software device */
	return nullptr;
}

EFASIM_EXPORT int ibv_rereg_mr(ibv_mr *, int, ibv_pd *, void *, size_t, int) { return EOPNOTSUPP; }

EFASIM_EXPORT int ibv_dereg_mr(ibv_mr *mr)
{
	if (!mr)
		return EINVAL;
	Mr *m = reinterpret_cast<Mr *>(mr);
	Runtime *rt = m->pd->ctx->rt;
	{
		std::lock_guard<std::mutex> g(rt->lock);
		auto it = rt->mrs.find(mr->lkey);
		if (it == rt->mrs.end() || it->second != m)
			return EINVAL;
		rt->mrs.erase(it); /* the key is refused from now on */
	}
	fork_support::account(mr->addr, mr->length, false);
	delete m;
	return 0;
}

/* ------------------------------------------------------------------ AH */
EFASIM_EXPORT ibv_ah *ibv_create_ah(ibv_pd *p, ibv_ah_attr *attr)
{
	if (!p || !attr || !attr->is_global || attr->port_num != 1) {
		errno = EINVAL; /* EFA needs a global route: is_global = 1 and the peer's GID */
		return nullptr;
	}
	Gid gid;
	std::memcpy(gid.raw, attr->grh.dgid.raw, 16);
	sockaddr_in sa;
	if (!gid_to_sockaddr(gid, 1, sa)) {
		errno = EINVAL; /* not a GID of a software EFA device */
		return nullptr;
	}
	Pd *pd = reinterpret_cast<Pd *>(p);
	Runtime *rt = pd->ctx->rt;
	auto *ah = new (std::nothrow) Ah();
	if (!ah) {
		errno = ENOMEM;
		return nullptr;
	}
	ah->ah.context = p->context;
	ah->ah.pd = p;
	ah->gid = gid;
	std::lock_guard<std::mutex> g(rt->lock);
	auto [it, inserted] = pd->ah_by_gid.try_emplace(gid, Pd::AhRef{0, 0});
	if (inserted) {
		if (rt->next_ahn == 0xffff)
			rt->next_ahn = 1;
		it->second.ahn = rt->next_ahn++;
	}
	it->second.refs++;
	ah->ahn = it->second.ahn;
	ah->ah.handle = ah->ahn;
	return &ah->ah;
}

EFASIM_EXPORT int ibv_destroy_ah(ibv_ah *a)
{
	if (!a)
		return EINVAL;
	Ah *ah = reinterpret_cast<Ah *>(a);
	Pd *pd = reinterpret_cast<Pd *>(a->pd);
	Runtime *rt = pd->ctx->rt;
	{
		std::lock_guard<std::mutex> g(rt->lock);
		auto it = pd->ah_by_gid.find(ah->gid);
		if (it != pd->ah_by_gid.end() && --it->second.refs == 0)
			pd->ah_by_gid.erase(it);
	}
	delete ah;
	return 0;
}

/* ------------------------------------------------------------------ completion channels */
EFASIM_EXPORT ibv_comp_channel *ibv_create_comp_channel(ibv_context *c)
{
	if (!c) {
		errno = EINVAL;
		return nullptr;
	}
	auto *ch = new (std::nothrow) CompChannel();
	if (!ch) {
		errno = ENOMEM;
		return nullptr;
	}
	/* One eventfd count per pending event: readable exactly while events are queued. */
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		int err = errno;
		delete ch;
		errno = err;
		return nullptr;
	}
	ch->ch.context = c;
	ch->ch.refcnt = 0;
	return &ch->ch;
}

EFASIM_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel *c)
{
	if (!c)
		return EINVAL;
	if (c->refcnt)
		return EBUSY;
	auto *ch = reinterpret_cast<CompChannel *>(c);
	close(c->fd);
	delete ch;
	return 0;
}

EFASIM_EXPORT int ibv_get_cq_event(ibv_comp_channel *c, ibv_cq **cq, void **cq_context)
{
	if (!c || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	auto *ch = reinterpret_cast<CompChannel *>(c);
	uint64_t v;
	/* Blocks unless the application made the fd non-blocking, as with rdma-core. */
	if (read(c->fd, &v, sizeof v) != sizeof v)
		return -1;
	std::lock_guard<std::mutex> g(ch->lock);
	if (ch->events.empty()) {
		errno = EAGAIN;
		return -1;
	}
	Cq *q = ch->events.front();
	ch->events.pop_front();
	*cq = ibv_cq_ex_to_cq(&q->ex);
	*cq_context = q->ex.cq_context;
	return 0;
}

EFASIM_EXPORT void ibv_ack_cq_events(ibv_cq *cq, unsigned int nevents)
{
	if (!cq)
		return;
	Cq *q = Cq::from(cq);
	pthread_mutex_lock(&q->ex.mutex);
	q->ex.comp_events_completed += nevents;
	pthread_cond_signal(&q->ex.cond);
	pthread_mutex_unlock(&q->ex.mutex);
}

/* ------------------------------------------------------------------ async events */
EFASIM_EXPORT int ibv_get_async_event(ibv_context *c, ibv_async_event *)
{
	if (!c) {
		errno = EINVAL;
		return -1;
	}
	/* The software device raises no async events: block (or EAGAIN) like an idle device. */
	uint64_t v;
	ssize_t r = read(Context::from(c)->async_fd, &v, sizeof v);
	(void)r;
	errno = EAGAIN;
	return -1;
}

EFASIM_EXPORT void ibv_ack_async_event(ibv_async_event *) {}

/* rdma-core's fork support (libibverbs/memory.c): ibv_fork_init() and
 * ibv_is_fork_initialized() as above (namespace fork_support). */
EFASIM_EXPORT int ibv_fork_init(void) { return fork_support::init(); }
EFASIM_EXPORT ibv_fork_status ibv_is_fork_initialized(void) { return fork_support::status(); }

EFASIM_EXPORT int ibv_query_ece(ibv_qp *, ibv_ece *) { return EOPNOTSUPP; }
EFASIM_EXPORT int ibv_set_ece(ibv_qp *, ibv_ece *) { return EOPNOTSUPP; }
EFASIM_EXPORT int ibv_resize_cq(ibv_cq *, int) { return EOPNOTSUPP; }
EFASIM_EXPORT int ibv_attach_mcast(ibv_qp *, const ibv_gid *, uint16_t) { return EOPNOTSUPP; }
EFASIM_EXPORT int ibv_detach_mcast(ibv_qp *, const ibv_gid *, uint16_t) { return EOPNOTSUPP; }
EFASIM_EXPORT ibv_srq *ibv_create_srq(ibv_pd *, ibv_srq_init_attr *)
{
	errno = EOPNOTSUPP; /* EFA has no shared receive queues */
	return nullptr;
}
EFASIM_EXPORT int ibv_destroy_srq(ibv_srq *) { return EOPNOTSUPP; }
EFASIM_EXPORT int ibv_modify_srq(ibv_srq *, ibv_srq_attr *, int) { return EOPNOTSUPP; }
EFASIM_EXPORT int ibv_query_srq(ibv_srq *, ibv_srq_attr *) { return EOPNOTSUPP; }
EFASIM_EXPORT int ibv_query_qp_data_in_order(ibv_qp *, enum ibv_wr_opcode, uint32_t)
{
	return 0; /* SRD gives no ordering guarantee */
}

EFASIM_EXPORT int efasim_query_stats(ibv_context *c, efasim_stats *stats, size_t len)
{
	Context *ctx = Context::checked(c);
	if (!ctx || !stats)
		return EINVAL;
	std::lock_guard<std::mutex> g(ctx->rt->lock);
	std::memcpy(stats, &ctx->rt->stats, std::min(len, sizeof(efasim_stats)));
	return 0;
}
