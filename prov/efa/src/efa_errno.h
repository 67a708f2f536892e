/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The one table of EFA completion codes: the device's CQE status (vendor_err), its
 * name, the libfabric error a completion with it reports, and a message that says what
 * the user can do; codes from 4096 are the provider's own (not the device's). Documented in man/fi_efa.7.md ("Errors"), which a unit test keeps in
 * step with this list.
 */
#ifndef EFA_ERRNO_H
#define EFA_ERRNO_H

#include <rdma/fi_errno.h>

#include <cstdint>

/* X(code, NAME, FI_E*, message) */
#define EFA_STATUS_TABLE(X)                                                                                 \
	X(0, OK, 0, "Success")                                                                              \
	X(1, FLUSHED, FI_ECANCELED, "Operation flushed: the endpoint was closed or entered an error state") \
	X(2, LOCAL_ERROR_QP_INTERNAL_ERROR, FI_EIO,                                                         \
	  "Internal queue pair error in the local device; the endpoint must be reopened")                   \
	X(3, LOCAL_ERROR_UNSUPPORTED_OP, FI_EOPNOTSUPP,                                                     \
	  "Operation not supported by the local device (check the device's capabilities with fi_info)")     \
	X(4, LOCAL_ERROR_INVALID_AH, FI_EINVAL,                                                             \
	  "Invalid destination address handle: the peer address is not valid in this domain")              \
	X(5, LOCAL_ERROR_INVALID_LKEY, FI_EINVAL,                                                           \
	  "Local buffer not registered, or not covered by the memory descriptor given (register it with "   \
	  "fi_mr_reg and pass fi_mr_desc())")                                                               \
	X(6, LOCAL_ERROR_BAD_LENGTH, FI_EMSGSIZE,                                                           \
	  "Message too long for the device (larger than the MTU for sends, or max_rdma_size for RMA)")       \
	X(7, REMOTE_ERROR_BAD_ADDRESS, FI_EACCES,                                                           \
	  "Remote memory access denied: the key is unknown or revoked, the range lies outside the region, " \
	  "or the region lacks the access flag")                                                            \
	X(8, REMOTE_ERROR_ABORT, FI_ECONNABORTED, "The peer aborted the operation (connection reset)")       \
	X(9, REMOTE_ERROR_BAD_DEST_QPN, FI_EHOSTUNREACH,                                                    \
	  "Destination endpoint does not exist or is in an error state (was the peer restarted?)")          \
	X(10, REMOTE_ERROR_RNR, FI_ENORX,                                                                   \
	  "Receiver not ready: the peer posted no receive buffer in time; post receives earlier, raise "    \
	  "FI_EFA_RX_SIZE, or allow more RNR retries (FI_OPT_EFA_RNR_RETRY)")                                \
	X(11, REMOTE_ERROR_BAD_LENGTH, FI_ETRUNC, "The peer's receive buffer is too short for the message")   \
	X(12, REMOTE_ERROR_BAD_STATUS, FI_EIO, "Unexpected status from the peer's device")                   \
	X(13, LOCAL_ERROR_UNRESP_REMOTE, FI_EHOSTUNREACH,                                                   \
	  "Unresponsive peer: it answered before but stopped (the process may have exited or crashed)")     \
	X(14, REMOTE_ERROR_UNKNOWN_PEER, FI_EHOSTUNREACH,                                                   \
	  "The peer does not know this endpoint: RMA needs the target to have inserted the initiator's "    \
	  "address in its address vector")                                                                  \
	X(15, LOCAL_ERROR_UNREACH_REMOTE, FI_EHOSTUNREACH,                                                  \
	  "Unreachable peer: it never answered (wrong address, peer not started, or network/security-group " \
	  "rules blocking the path)")                                                                       \
	X(18, REMOTE_ERROR_FEATURE_MISMATCH, FI_EOPNOTSUPP,                                                 \
	  "The peer's device lacks a feature this operation needs (for example RDMA write on an older "     \
	  "generation)")                                                                                    \
	X(4160, PEER_PROTOCOL_MISMATCH, FI_EHOSTUNREACH,                                                    \
	  "The peer speaks another RDM protocol than EFA RDM protocol v4 (which this provider and "         \
	  "libfabric's own efa provider speak; an older build of this provider spoke version 1): run a "    \
	  "v4 provider on every node")                                                                      \
	X(4161, PEER_REMOVED, FI_ECANCELED,                                                                 \
	  "The peer was removed from the address vector (fi_av_remove) while this operation waited on it")  \
	X(4162, PEER_REPLACED, FI_EHOSTUNREACH,                                                             \
	  "A new endpoint sends from the peer's QP number (the peer was restarted): remove the old address " \
	  "with fi_av_remove and insert the new endpoint's name")                                           \
	X(4163, POST_FAILED, FI_EIO,                                                                        \
	  "The local device refused a work request (see the warning logged with it); reopen the endpoint")   \
	X(4164, REGISTRATION_FAILED, FI_EIO,                                                                \
	  "Registering an application buffer for an RDMA read failed (locked-memory limit: raise ulimit -l, " \
	  "or pass descriptors of memory registered with fi_mr_reg)")                                      \
	X(4165, TARGET_REFUSED, FI_EIO,                                                                     \
	  "The target refused the emulated RMA or atomic operation; the error code says why (FI_EACCES: key, " \
	  "range or access not registered there; FI_EINVAL: malformed request; FI_EOPNOTSUPP: operation or " \
	  "datatype not supported there)")                                                                \
	X(4166, PEER_KEY_REFUSED, FI_EACCES,                                                                \
	  "A same-host peer has no region with this key, range and access (checked before the operation "  \
	  "went to shm): pass the key and virtual address of memory it registered with FI_REMOTE_READ / "   \
	  "FI_REMOTE_WRITE")

namespace efa {

enum class EfaStatus : uint32_t {
#define EFA_X(code, name, fierr, msg) name = code,
	EFA_STATUS_TABLE(EFA_X)
#undef EFA_X
};

/* Name ("REMOTE_ERROR_RNR"), or nullptr for a code not in the table. */
const char *efa_status_name(uint32_t code);
/* What to tell the user. Never null. */
const char *efa_status_msg(uint32_t code);
/* Positive FI_E* value for a failed completion (FI_EIO for unknown codes). */
int efa_status_to_fi(uint32_t code);

} // namespace efa

#endif
