/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "verbs/api.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstring>
#include <mutex>

namespace efa::verbs {

namespace {

template <typename F> bool sym(void *h, const char *name, F &out, bool required, std::string *why)
{
	out = reinterpret_cast<F>(dlsym(h, name));
	if (!out && required) {
		if (why)
			*why = std::string("entry point ") + name + " missing";
		return false;
	}
	return true;
}

/* Directory of the library that contains this code (libefa-fi.so), with a trailing '/'. */
std::string own_dir()
{
	Dl_info info{};
	if (!dladdr(reinterpret_cast<void *>(&own_dir), &info) || !info.dli_fname)
		return {};
	std::string p = info.dli_fname;
	size_t slash = p.rfind('/');
	return slash == std::string::npos ? std::string() : p.substr(0, slash + 1);
}

} // namespace

bool parse_sim_mode(const char *s, SimMode &out)
{
	if (!s || !*s || !strcasecmp(s, "auto"))
		out = SimMode::Auto;
	else if (!strcmp(s, "1") || !strcasecmp(s, "on") || !strcasecmp(s, "yes") || !strcasecmp(s, "true"))
		out = SimMode::On;
	else if (!strcmp(s, "0") || !strcasecmp(s, "off") || !strcasecmp(s, "no") || !strcasecmp(s, "false"))
		out = SimMode::Off;
	else
		return false;
	return true;
}

bool fill_api(Api &a, void *v, void *e, std::string *why)
{
	bool ok = sym(v, "ibv_get_device_list", a.get_device_list, true, why) &&
		  sym(v, "ibv_free_device_list", a.free_device_list, true, why) &&
		  sym(v, "ibv_get_device_name", a.get_device_name, true, why) &&
		  sym(v, "ibv_open_device", a.open_device, true, why) &&
		  sym(v, "ibv_close_device", a.close_device, true, why) &&
		  sym(v, "ibv_query_device", a.query_device, true, why) &&
		  sym(v, "ibv_query_port", a.query_port, true, why) &&
		  sym(v, "ibv_query_gid", a.query_gid, true, why) && sym(v, "ibv_alloc_pd", a.alloc_pd, true, why) &&
		  sym(v, "ibv_dealloc_pd", a.dealloc_pd, true, why) && sym(v, "ibv_reg_mr", a.reg_mr, true, why) &&
		  sym(v, "ibv_reg_mr_iova2", a.reg_mr_iova2, false, why) &&
		  sym(v, "ibv_dereg_mr", a.dereg_mr, true, why) && sym(v, "ibv_create_ah", a.create_ah, true, why) &&
		  sym(v, "ibv_destroy_ah", a.destroy_ah, true, why) &&
		  sym(v, "ibv_destroy_cq", a.destroy_cq, true, why) &&
		  sym(v, "ibv_create_comp_channel", a.create_comp_channel, true, why) &&
		  sym(v, "ibv_destroy_comp_channel", a.destroy_comp_channel, true, why) &&
		  sym(v, "ibv_get_cq_event", a.get_cq_event, true, why) &&
		  sym(v, "ibv_ack_cq_events", a.ack_cq_events, true, why) &&
		  sym(v, "ibv_modify_qp", a.modify_qp, true, why) && sym(v, "ibv_query_qp", a.query_qp, true, why) &&
		  sym(v, "ibv_destroy_qp", a.destroy_qp, true, why) &&
		  sym(v, "ibv_qp_to_qp_ex", a.qp_to_qp_ex, true, why) &&
		  sym(v, "ibv_fork_init", a.fork_init, false, why) &&
		  sym(v, "ibv_is_fork_initialized", a.is_fork_initialized, false, why) &&
		  sym(e, "efadv_query_device", a.efadv_query_device, true, why) &&
		  sym(e, "efadv_query_ah", a.efadv_query_ah, true, why) &&
		  sym(e, "efadv_create_qp_ex", a.efadv_create_qp_ex, true, why) &&
		  sym(e, "efadv_create_cq", a.efadv_create_cq, false, why) &&
		  sym(e, "efadv_cq_from_ibv_cq_ex", a.efadv_cq_from_ibv_cq_ex, false, why) &&
		  sym(e, "efadv_qp_from_ibv_qp_ex", a.efadv_qp_from_ibv_qp_ex, false, why) &&
		  sym(e, "efadv_get_max_sq_depth", a.efadv_get_max_sq_depth, false, why) &&
		  sym(e, "efadv_get_max_rq_depth", a.efadv_get_max_rq_depth, false, why) &&
		  sym(v, "efasim_query_stats", a.efasim_query_stats, false, why);
	return ok;
}

const Api *load_rdma_core(std::string *why)
{
	static Api api;
	static const Api *result;
	static std::string error;
	static std::once_flag once;
	std::call_once(once, [] {
		void *v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
		if (!v) {
			error = std::string("rdma-core is not installed (") + dlerror() + ")";
			return;
		}
		void *e = dlopen("libefa.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
		if (!e) {
			error = std::string("libefa.so.1 (rdma-core's EFA provider) is not installed (") + dlerror() + ")";
			return;
		}
		std::string w;
		if (!fill_api(api, v, e, &w)) {
			error = "rdma-core too old: " + w;
			return;
		}
		api.software = false;
		api.origin = "libibverbs.so.1 + libefa.so.1";
		result = &api;
	});
	if (!result && why)
		*why = error;
	return result;
}

const Api *load_sim(const std::string &path, std::string *why)
{
	static Api api;
	static const Api *result;
	static std::string error;
	static std::once_flag once;
	std::call_once(once, [&path] {
		std::string tried;
		void *h = nullptr;
		std::string candidates[2];
		if (!path.empty()) {
			candidates[0] = path;
		} else {
			candidates[0] = own_dir() + "libefasim.so";
			candidates[1] = "libefasim.so";
		}
		std::string used;
		for (const std::string &c : candidates) {
			if (c.empty())
				continue;
			/* Local: its ibv_* symbols must not interpose on a real libibverbs. */
			h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
			if (h) {
				used = c;
				break;
			}
			tried += std::string(tried.empty() ? "" : "; ") + dlerror();
		}
		if (!h) {
			error = "cannot load the software EFA device: " + tried + " (set FI_EFA_SIM_PATH)";
			return;
		}
		std::string w;
		if (!fill_api(api, h, h, &w)) {
			error = used + " is not a software EFA device: " + w;
			return;
		}
		api.software = true;
		api.origin = used;
		result = &api;
	});
	if (!result && why)
		*why = error;
	return result;
}

} // namespace efa::verbs
