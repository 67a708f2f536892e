/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "topology.h"

#include "log.h"

#include <hwloc.h>

#include <algorithm>
#include <mutex>
#include <numeric>

namespace efa {

namespace {

hwloc_topology_t topology()
{
	static hwloc_topology_t topo;
	static std::once_flag once;
	std::call_once(once, [] {
		if (hwloc_topology_init(&topo) ||
		    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) ||
		    hwloc_topology_load(topo)) {
			EFA_INFO(Core, "hwloc topology unavailable: devices keep their rdma-core order");
			topo = nullptr;
		}
	});
	return topo;
}

/* 0: local to the calling thread; 1: remote; 2: unknown (no PCI or no topology). */
int distance(hwloc_topology_t topo, hwloc_const_cpuset_t mine, const verbs::Device &d)
{
	const verbs::PciAddr *pci = d.pci();
	if (!topo || !pci || !mine)
		return 2;
	hwloc_obj_t obj = hwloc_get_pcidev_by_busid(topo, pci->domain, pci->bus, pci->dev, pci->fn);
	if (!obj)
		return 2;
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
	if (!anc || !anc->cpuset)
		return 2;
	return hwloc_bitmap_intersects(anc->cpuset, mine) ? 0 : 1;
}

} // namespace

std::vector<size_t> order_by_locality(const std::vector<const verbs::Device *> &devs)
{
	std::vector<size_t> idx(devs.size());
	std::iota(idx.begin(), idx.end(), 0);
	bool any_pci = std::any_of(devs.begin(), devs.end(), [](const verbs::Device *d) { return d->pci(); });
	if (!any_pci)
		return idx;
	hwloc_topology_t topo = topology();
	hwloc_bitmap_t mine = hwloc_bitmap_alloc();
	if (!topo || hwloc_get_cpubind(topo, mine, HWLOC_CPUBIND_THREAD)) {
		hwloc_bitmap_free(mine);
		return idx;
	}
	std::vector<int> dist(devs.size());
	for (size_t i = 0; i < devs.size(); i++)
		dist[i] = distance(topo, mine, *devs[i]);
	hwloc_bitmap_free(mine);
	std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return dist[a] < dist[b]; });
	return idx;
}

} // namespace efa
