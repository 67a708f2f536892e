/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The efa fabric's sizes that fi_getinfo reports and the endpoint honours, derived from
 * the device and the protocol's headers. Here, in the RDM layer, so that the objects
 * layer (info.cpp) never includes the protocol: it only calls rdm_prototype().
 */
#ifndef EFA_RDM_ATTRS_H
#define EFA_RDM_ATTRS_H

#include "verbs/device.h"

#include <cstddef>

namespace efa {

struct RdmLimits {
	size_t inject;	   /* tx_attr->inject_size: fits one eager packet with every header */
	size_t max_atomic; /* bytes of one atomic operation (ordered sizes) */
};
RdmLimits rdm_limits(const verbs::Device &dev);

} // namespace efa

#endif
