/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Device order by distance from the calling thread (hwloc): devices whose PCI locality
 * (the CPUs of their nearest non-I/O ancestor) overlaps the CPUs the thread is bound to
 * come first, so a process pinned to a socket gets that socket's NIC as its first
 * fi_info. Devices without a PCI address (the software device) keep their order, after
 * local ones. The topology is loaded once per process.
 */
#ifndef EFA_TOPOLOGY_H
#define EFA_TOPOLOGY_H

#include "verbs/device.h"

#include <vector>

namespace efa {

/* Indices of `devs`, nearest first; a stable order among equals. */
std::vector<size_t> order_by_locality(const std::vector<const verbs::Device *> &devs);

} // namespace efa

#endif
