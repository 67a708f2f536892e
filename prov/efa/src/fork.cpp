/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* fork(): see fork.h. */
#include "fork.h"

#include "log.h"
#include "mr_cache.h"
#include "params.h"
#include "verbs/api.h"

#include <rdma/fi_errno.h>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace efa {

uint32_t g_fork_generation = 0;

namespace {

bool g_unsafe = false;	   /* registered memory, rdma-core's fork support off, a kernel that needs it */
bool g_support_on = false; /* rdma-core's fork support turned on (registered pages MADV_DONTFORK) */

void on_fork_prepare()
{
	/* Cached registrations nothing uses would keep their pages from the child. */
	if (g_support_on)
		MrCache::release_unused_all();
	if (g_unsafe)
		EFA_WARN(Core, "fork() while rdma-core's fork support is off on a kernel that needs it (before 5.13): "
			 "a transfer into memory the parent writes after this fork can be lost or land in the "
			 "child's copy. Unset FI_EFA_FORK_SAFE=0, or set RDMAV_FORK_SAFE=1 before the first "
			 "registration");
}

void on_fork_child() { g_fork_generation++; }

const char *status_name(ibv_fork_status s)
{
	switch (s) {
	case IBV_FORK_DISABLED: return "off";
	case IBV_FORK_ENABLED: return "on";
	case IBV_FORK_UNNEEDED: return "not needed (the kernel copies registered pages on fork)";
	}
	return "unknown";
}

} // namespace

namespace fork {

uint32_t generation()
{
	static const bool installed = pthread_atfork(on_fork_prepare, nullptr, on_fork_child) == 0;
	(void)installed;
	return g_fork_generation;
}

void refused()
{
	static uint32_t warned = 0;
	if (warned == g_fork_generation)
		return;
	warned = g_fork_generation;
	EFA_WARN(Core, "this process is a fork() child of the process that opened this libfabric object: a child "
		 "cannot use its parent's fabric, domain, endpoints, CQs, counters, AVs or MRs (calls answer "
		 "-FI_EINVAL; nothing the parent uses is touched). exec() a program, or exit; the parent's "
		 "transfers go on");
}

int prepare(const verbs::Api &api)
{
	generation();
	static std::mutex lock;
	std::lock_guard<std::mutex> g(lock);
	verbs::SimMode want = verbs::SimMode::Auto;
	const std::string &v = params().fork_safe;
	if (!verbs::parse_sim_mode(v.c_str(), want)) {
		EFA_WARN(Domain, "FI_EFA_FORK_SAFE=%s is not auto, 1 or 0; using auto", v.c_str());
		want = verbs::SimMode::Auto;
	}
	if (want == verbs::SimMode::Auto && (getenv("RDMAV_FORK_SAFE") || getenv("IBV_FORK_SAFE")))
		want = verbs::SimMode::On;
	const ibv_fork_status before = api.is_fork_initialized ? api.is_fork_initialized() : IBV_FORK_DISABLED;
	if (before != IBV_FORK_DISABLED) {
		EFA_INFO(Domain, "rdma-core fork support: %s", status_name(before));
		g_unsafe = false;
		g_support_on = before == IBV_FORK_ENABLED;
		return 0;
	}
	if (want == verbs::SimMode::Off) {
		EFA_INFO(Domain, "rdma-core fork support: off (FI_EFA_FORK_SAFE=0) on a kernel that needs it");
		g_unsafe = true;
		return 0;
	}
	const int r = api.fork_init ? api.fork_init() : ENOSYS;
	if (!r) {
		EFA_INFO(Domain, "rdma-core fork support: turned on (the kernel does not copy registered pages on fork; "
			 "registrations cost an madvise each)");
		g_unsafe = false;
		g_support_on = true;
		return 0;
	}
	if (want == verbs::SimMode::On) {
		EFA_WARN(Domain, "FI_EFA_FORK_SAFE=1: rdma-core's fork support cannot be turned on (ibv_fork_init: %s; "
			 "memory was registered before the first domain): call ibv_fork_init() or set "
			 "RDMAV_FORK_SAFE=1 before anything is registered",
			 strerror(r));
		return -FI_EINVAL;
	}
	EFA_WARN_ONCE(Domain, "rdma-core's fork support cannot be turned on (ibv_fork_init: %s; memory was "
		      "registered before the first domain) on a kernel that needs it: a fork() during transfers "
		      "can corrupt them. Set RDMAV_FORK_SAFE=1 in the environment",
		      strerror(r));
	g_unsafe = true;
	return 0;
}

} // namespace fork

void *map_dontfork(size_t len, bool noreserve)
{
	void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (noreserve ? MAP_NORESERVE : 0),
		       -1, 0);
	if (p == MAP_FAILED)
		return nullptr;
	if (madvise(p, len, MADV_DONTFORK))
		EFA_WARN_ONCE(Core, "madvise(MADV_DONTFORK) of the provider's own buffers failed: %s; a fork() child "
			      "gets a copy of them", strerror(errno));
	return p;
}

bool DmaBuffer::alloc(size_t len)
{
	reset();
	const size_t page = size_t(sysconf(_SC_PAGESIZE));
	const size_t mapped = (std::max<size_t>(len, 1) + page - 1) / page * page;
	void *p = map_dontfork(mapped);
	if (!p)
		return false;
	data_ = static_cast<uint8_t *>(p);
	len_ = len;
	mapped_ = mapped;
	return true;
}

void DmaBuffer::reset()
{
	if (data_)
		munmap(data_, mapped_);
	data_ = nullptr;
	len_ = mapped_ = 0;
}

} // namespace efa
