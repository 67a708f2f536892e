/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The target side of an emulated atomic (docs/protocol.md section 8, the RTAs): applies a
 * libfabric atomic operation in software to memory this process owns.
 *
 * Nothing here is atomic with respect to other threads or to the device: the caller
 * serialises emulated atomics on a target region (they arrive through one endpoint's
 * progress), which is all the emulation promises.
 *
 * kind, op and datatype come from the wire as bytes, so every entry point accepts any
 * value of the enums, including values libfabric does not define.
 */
#ifndef EFA_RDM_ATOMIC_OPS_H
#define EFA_RDM_ATOMIC_OPS_H

#include "rdm/pkt.h"

#include <rdma/fi_atomic.h>

#include <cstddef>

namespace efa::rdm {

/* What an atomic does with the target's old values: nothing (write), return them
 * (fetch), or return them and write only where they equal the comparands (compare). */
enum class AtomicKind : uint8_t { Write = 0, Fetch = 1, Compare = 2 };

/*
 * Bytes per element of a point-to-point atomic datatype (FI_INT8 .. FI_LONG_DOUBLE_COMPLEX);
 * 0 for any other value, the 128-bit integers included: this unit does not execute them.
 */
size_t atomic_datatype_size(fi_datatype dt);

/* Whether atomic_apply() executes (kind, op, dt); see atomic_ops.cpp for the table. */
bool atomic_valid(AtomicKind kind, fi_op op, fi_datatype dt);

/*
 * Applies op to count elements of type dt at target, element by element.
 *
 * target, operand, compare and result may be unaligned and must not overlap each other.
 * operand is read for every op but FI_ATOMIC_READ (where it may be null); compare is read
 * for the Compare kind only. For the Fetch and Compare kinds result receives the target's
 * values from before the operation (nothing is written there when it is null); the Write
 * kind never touches result. FI_ATOMIC_READ and an unmet compare condition leave the
 * target's bytes as they were.
 *
 * Returns 0, or -FI_EOPNOTSUPP when !atomic_valid(kind, op, dt), in which case no buffer
 * is read or written.
 */
int atomic_apply(AtomicKind kind, fi_op op, fi_datatype dt, void *target, const void *operand,
		 const void *compare, void *result, size_t count);

} // namespace efa::rdm

#endif
