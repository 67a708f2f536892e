/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "fid.h"

#include "log.h"

#include <deque>
#include <mutex>

namespace efa {

namespace {

int dead_close(fid_t) { return -FI_EINVAL; }
int dead_bind(fid_t, fid_t, uint64_t) { return -FI_EINVAL; }
int dead_control(fid_t, int, void *) { return -FI_EINVAL; }
int dead_ops_open(fid_t, const char *, uint64_t, void **, void *) { return -FI_EINVAL; }

fi_ops g_dead_ops = {
	.size = sizeof(fi_ops),
	.close = dead_close,
	.bind = dead_bind,
	.control = dead_control,
	.ops_open = dead_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

struct Retired {
	void (*destroy)(void *);
	void *obj;
};

constexpr size_t kQuarantine = 1024;

std::mutex g_lock;
std::deque<Retired> *g_retired = new std::deque<Retired>(); /* never destroyed */

} // namespace

void retire(fid_t f, ObjHeader &hdr, void (*destroy)(void *), void *obj)
{
	hdr.magic = Magic::Dead;
	f->ops = &g_dead_ops;
	Retired victim{nullptr, nullptr};
	{
		std::lock_guard<std::mutex> g(g_lock);
		g_retired->push_back(Retired{destroy, obj});
		if (g_retired->size() > kQuarantine) {
			victim = g_retired->front();
			g_retired->pop_front();
		}
	}
	if (victim.destroy)
		victim.destroy(victim.obj);
}

int no_bind(fid_t, fid_t, uint64_t) { return -FI_ENOSYS; }
int no_control(fid_t, int, void *) { return -FI_ENOSYS; }
int no_ops_open(fid_t, const char *, uint64_t, void **, void *) { return -FI_ENOSYS; }

} // namespace efa
