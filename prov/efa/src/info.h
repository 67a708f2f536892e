/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fi_getinfo: the fi_info the provider offers per device and fabric, and the filter
 * that tailors them to the application's hints.
 *
 * Order of the list: every efa-direct info (one per device, devices nearest to the
 * calling thread first), then every efa fabric info, then every FI_EP_DGRAM info (fabric
 * efa, domain <device>-dgrm: the device's UD QPs), as upstream orders them. A hint that cannot be
 * met drops the candidate; the reason is logged at debug level (FI_LOG_LEVEL=debug),
 * and when nothing is left fi_getinfo answers -FI_ENODATA.
 */
#ifndef EFA_INFO_H
#define EFA_INFO_H

#include "verbs/device.h"

#include <rdma/fabric.h>

#include <string>
#include <vector>

namespace efa {

inline constexpr const char kDirectFabric[] = "efa-direct";
inline constexpr const char kRdmFabric[] = "efa";
inline constexpr size_t kMaxErrData = 256; /* bytes of text in fi_cq_err_entry.err_data */

/* Capabilities of each fabric's transmit and receive attributes (modifier bits and the
 * secondary ones that apply to a direction included; FI_LOCAL_COMM and FI_REMOTE_COMM
 * apply to neither direction in fi_endpoint(3), so they live in info->caps only). */
inline constexpr uint64_t kDirectTxCaps = FI_MSG | FI_SEND | FI_RMA | FI_READ | FI_WRITE;
inline constexpr uint64_t kDirectRxCaps = FI_MSG | FI_RECV | FI_RMA | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SOURCE;
inline constexpr uint64_t kDirectMrMode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
inline constexpr uint64_t kRdmTxCaps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_READ | FI_WRITE;
inline constexpr uint64_t kRdmRxCaps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RECV | FI_REMOTE_READ |
				       FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE;
/* FI_TAG_GENERIC of newer libfabric headers (absent from 1.17's): tag bits with the
 * top bit set, which clients test to learn that all 64 bits are matched. */
inline constexpr uint64_t kTagGeneric = 0xaaaaaaaaaaaaaaaaull;
inline constexpr size_t kRdmQueueSize = 8192; /* operations in flight per endpoint and direction */
inline constexpr size_t kRdmIovLimit = 4;
/* What RMA and atomics need on the efa fabric; messages need no mr_mode bit. */
inline constexpr uint64_t kRdmMrMode = FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
inline constexpr uint64_t kRdmMsgOrder = FI_ORDER_SAS | FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW |
					 FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW;
inline constexpr uint64_t kTxOpFlags = FI_INJECT | FI_COMPLETION | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
				       FI_DELIVERY_COMPLETE | FI_MORE;
inline constexpr uint64_t kRxOpFlags = FI_COMPLETION | FI_MORE;
/* FI_EP_DGRAM (dgram/): messages over UD QPs, with the 40-byte prefix (FI_MSG_PREFIX) in
 * which the device writes the GRH a UD receive starts with. Unreliable: no delivery
 * complete. */
inline constexpr uint64_t kDgramTxCaps = FI_MSG | FI_SEND;
inline constexpr uint64_t kDgramRxCaps = FI_MSG | FI_RECV | FI_SOURCE;
inline constexpr uint64_t kDgramTxOpFlags = FI_INJECT | FI_COMPLETION | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
					    FI_MORE;
inline constexpr size_t kMsgPrefixSize = 40;
inline constexpr uint64_t kRdmRxOpFlags = FI_COMPLETION | FI_MORE | FI_MULTI_RECV;

/* The efa-direct info of one device, untailored (free with fi_freeinfo). */
fi_info *direct_prototype(const verbs::Device &dev);
/* The efa fabric's info of one device, untailored (rdm/attrs.cpp). */
fi_info *rdm_prototype(const verbs::Device &dev);
/* The FI_EP_DGRAM info of one device (fabric efa, domain <device>-dgrm), untailored. */
fi_info *dgram_prototype(const verbs::Device &dev);

/*
 * A copy of `proto` narrowed to `hints` for API `version`, or null with `why` set when
 * a hint cannot be met. `hints` may be null. `max_inject` is the largest inject size the
 * device can offer (its wide inline size).
 */
fi_info *tailor(const fi_info *proto, const fi_info *hints, uint32_t version, size_t max_inject, std::string *why);

/*
 * The whole fi_getinfo answer for `devs`. Returns 0 and a list, or -FI_ENODATA (with
 * debug lines saying what failed).
 */
int build_infos(uint32_t version, const char *node, const char *service, uint64_t flags, const fi_info *hints,
		const std::vector<const verbs::Device *> &devs, fi_info **out);

/* The device an fi_info (from this provider) was built for, by domain name (<device>-rdm
 * or <device>-dgrm; `dgram` says which, when not null). */
const verbs::Device *device_of(const fi_info *info, const std::vector<const verbs::Device *> &devs,
			       bool *dgram = nullptr);

} // namespace efa

#endif
