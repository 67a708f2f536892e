/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "prov.h"

#include "fabric.h"
#include "info.h"
#include "mem_monitor.h"
#include "log.h"
#include "params.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

namespace efa {

namespace {

int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags, const fi_info *hints,
	    fi_info **info);
void cleanup();

struct DeviceSet {
	std::mutex lock;
	bool hw_probed = false;
	bool sim_probed = false;
	uint32_t gen = 0; /* the process generation the devices were opened in (fork.h) */
	std::vector<std::unique_ptr<verbs::Device>> devices;
};

/* In a fork() child, the parent's devices: forgotten, never closed (closing would tear
 * down what the parent still uses); the child probes again. Called with s.lock held. */
void forget_inherited(DeviceSet &s)
{
	if (s.gen == fork_generation())
		return;
	for (auto &d : s.devices)
		(void)d.release();
	s.devices.clear();
	s.hw_probed = s.sim_probed = false;
	s.gen = fork_generation();
}

DeviceSet &device_set()
{
	static DeviceSet *s = new DeviceSet(); /* outlives static destructors */
	return *s;
}

void log_found(const std::vector<std::unique_ptr<verbs::Device>> &devs)
{
	for (const auto &d : devs)
		EFA_INFO(Core, "using EFA device %s", d->describe().c_str());
}

} // namespace

fi_provider g_prov = {
	/* Beside a built-in efa provider libfabric keeps the higher version, and on a tie
	 * the first registered, ours; FI_PROVIDER_PATH can decide instead (builtin.cpp). */
	.version = kProviderVersion,
	/* The libfabric API this build was compiled against: 1.17 with Debian's headers, 2.x
	 * with --with-libfabric=DIR. Applications asking for a newer API do not see it. */
	.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.context = {},
	.name = "efa",
	.getinfo = getinfo,
	.fabric = fabric_open,
	.cleanup = cleanup,
};

bool fi_provider_env_selects_efa()
{
	const char *v = getenv("FI_PROVIDER");
	if (!v || !*v || *v == '^')
		return false; /* unset, or an exclusion list */
	std::stringstream ss(v);
	std::string item;
	while (std::getline(ss, item, ',')) {
		/* "efa", or a layered name such as "efa;ofi_rxd" */
		if (item == "efa" || item.rfind("efa;", 0) == 0)
			return true;
	}
	return false;
}

const std::vector<std::unique_ptr<verbs::Device>> &devices(bool explicit_efa)
{
	DeviceSet &s = device_set();
	std::lock_guard<std::mutex> g(s.lock);
	forget_inherited(s);
	const Params &p = params();
	verbs::SimMode mode;
	if (!verbs::parse_sim_mode(p.sim.c_str(), mode)) {
		EFA_WARN(Core, "FI_EFA_SIM=%s is not auto, 1 or 0; using auto", p.sim.c_str());
		mode = verbs::SimMode::Auto;
	}
	if (!s.hw_probed && mode != verbs::SimMode::On) {
		s.hw_probed = true;
		std::string why;
		if (const verbs::Api *api = verbs::load_rdma_core(&why)) {
			s.devices = verbs::Device::discover(*api, p.iface);
			if (s.devices.empty())
				EFA_INFO(Core, "rdma-core lists no EFA device on this host");
		} else {
			EFA_INFO(Core, "no hardware EFA devices: %s", why.c_str());
		}
		log_found(s.devices);
	}
	const bool want_sim = mode == verbs::SimMode::On || (mode == verbs::SimMode::Auto && explicit_efa);
	if (s.devices.empty() && !s.sim_probed && want_sim) {
		s.sim_probed = true;
		std::string why;
		if (const verbs::Api *api = verbs::load_sim(p.sim_path, &why)) {
			s.devices = verbs::Device::discover(*api, p.iface);
			if (s.devices.empty())
				EFA_WARN(Core, "the software EFA device (%s) offers no device: check the EFASIM_* "
					 "variables (see efasim(7))",
					 api->origin.c_str());
			log_found(s.devices);
		} else {
			EFA_WARN(Core, "%s", why.c_str());
		}
	}
	if (s.devices.empty() && mode == verbs::SimMode::Auto && !explicit_efa && !s.sim_probed) {
		EFA_INFO(Core, "no EFA device: no hardware EFA device found, and the software EFA device is used "
			 "only when FI_EFA_SIM=1 or when the efa provider is selected explicitly (FI_PROVIDER=efa)");
	} else if (s.devices.empty() && mode == verbs::SimMode::Off) {
		EFA_INFO(Core, "no EFA device: no hardware EFA device found, and FI_EFA_SIM=0 disables the software "
			 "EFA device");
	}
	return s.devices;
}

void close_devices()
{
	DeviceSet &s = device_set();
	std::lock_guard<std::mutex> g(s.lock);
	forget_inherited(s);
	s.devices.clear();
	s.hw_probed = s.sim_probed = false;
}

namespace {

int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags, const fi_info *hints,
	    fi_info **info)
{
	*info = nullptr;
	bool explicit_efa = fi_provider_env_selects_efa() ||
			    (hints && hints->fabric_attr && hints->fabric_attr->prov_name &&
			     strstr(hints->fabric_attr->prov_name, "efa"));
	const auto &devs = devices(explicit_efa);
	if (devs.empty())
		return -FI_ENODATA;
	std::vector<const verbs::Device *> list;
	for (const auto &d : devs)
		list.push_back(d.get());
	return build_infos(version, node, service, flags, hints, list, info);
}


void cleanup()
{
	MemMonitor::shutdown();
	close_devices();
}

} // namespace

} // namespace efa
