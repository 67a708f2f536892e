/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The provider: its fi_provider (name "efa"), and the process-wide set of EFA devices,
 * hardware or software, found once and shared by every fabric and domain.
 */
#ifndef EFA_PROV_H
#define EFA_PROV_H

#include "verbs/device.h"

#include <rdma/providers/fi_prov.h>

#include <memory>
#include <vector>

namespace efa {

extern fi_provider g_prov;

/* fi_provider.version, in libfabric's scheme for its own providers: the release of the
 * libfabric headers this build used (1.17.0 -> 117.0, 2.6.0 -> 206.0). Clients read it
 * that way (Open MPI's btl ofi turns away an efa provider that reports a low one). */
constexpr uint32_t kProviderVersion = FI_VERSION(FI_MAJOR_VERSION * 100 + FI_MINOR_VERSION, FI_REVISION_VERSION * 10);

/*
 * The devices this process may use. Found on first use: hardware EFA devices through
 * rdma-core; when there are none, the software EFA device if FI_EFA_SIM=1, or if
 * FI_EFA_SIM=auto and `explicit_efa` (the application or FI_PROVIDER named efa).
 * Logs (at info level) what it found and whether it is hardware or software.
 */
const std::vector<std::unique_ptr<verbs::Device>> &devices(bool explicit_efa);

/* True when FI_PROVIDER selects the efa provider by name. */
bool fi_provider_env_selects_efa();

/* Closes every device (provider cleanup). */
void close_devices();

} // namespace efa

#endif
