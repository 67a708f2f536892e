/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The statistics of the software device the provider loaded, for tests that drive it
 * through libfabric. Opening libefasim.so (EFA_TEST_SIM_PATH) again gives the library
 * already in the process, and its device 0 is the provider's (statistics are per device
 * and process), so a context of our own reads the counters the provider's QPs drive.
 * The context is opened once and kept for the process.
 */
#ifndef EFA_TEST_LOADED_SIM_H
#define EFA_TEST_LOADED_SIM_H

#include <criterion/criterion.h>
#include <infiniband/verbs.h>

#include <dlfcn.h>

#include "../sim/efasim.h"

inline efasim_stats loaded_sim_stats()
{
	static ibv_context *ctx;
	static int (*query)(ibv_context *, efasim_stats *, size_t);
	if (!ctx) {
		void *h = dlopen(EFA_TEST_SIM_PATH, RTLD_NOW | RTLD_LOCAL);
		cr_assert_not_null(h, "%s", dlerror());
		auto list = reinterpret_cast<ibv_device **(*)(int *)>(dlsym(h, "ibv_get_device_list"));
		auto open = reinterpret_cast<ibv_context *(*)(ibv_device *)>(dlsym(h, "ibv_open_device"));
		query = reinterpret_cast<int (*)(ibv_context *, efasim_stats *, size_t)>(dlsym(h, "efasim_query_stats"));
		cr_assert(list && open && query);
		int n = 0;
		ibv_device **l = list(&n);
		cr_assert(l && n > 0);
		ctx = open(l[0]);
		cr_assert_not_null(ctx);
	}
	efasim_stats st{};
	cr_assert_eq(query(ctx, &st, sizeof st), 0);
	return st;
}

#endif
