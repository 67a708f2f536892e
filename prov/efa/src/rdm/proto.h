/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The choice of a send protocol by size and capability (docs/protocol.md section 5), and
 * the first checks of an operation call, kept apart from the endpoint so that they are
 * tested on their own (test_rdm_proto).
 */
#ifndef EFA_RDM_PROTO_H
#define EFA_RDM_PROTO_H

#include "rdm/pkt.h"

#include <cstddef>
#include <cstdint>

namespace efa::rdm {

enum class Proto : uint8_t { Eager, Medium, LongCts, LongRead, DeviceRma, EmuWrite, EmuRead, EmuAtomic };

struct SendLimits {
	size_t mtu;	    /* the device's packet size */
	size_t opt;	    /* optional header bytes of this REQ (req_opt_len) */
	size_t max_medium;  /* FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE */
	size_t min_read;    /* FI_EFA_INTER_MIN_READ_MESSAGE_SIZE */
	bool read_ok;	    /* both devices have RDMA read and the peer's handshake is known */
};

/* Payload bytes of one EAGER packet, and of each MEDIUM segment. */
inline size_t eager_max(size_t mtu, size_t opt) { return mtu - kEagerHdrMax - opt; }
inline size_t eager_max(const SendLimits &l) { return eager_max(l.mtu, l.opt); }
inline size_t medium_segment(const SendLimits &l) { return l.mtu - kMediumHdrMax - l.opt; }

inline Proto select_send(uint64_t len, const SendLimits &l)
{
	if (len <= eager_max(l))
		return Proto::Eager;
	if (len <= l.max_medium)
		return Proto::Medium;
	if (l.read_ok && len >= l.min_read)
		return Proto::LongRead;
	return Proto::LongCts;
}

/* Packets a message takes in its first burst (MEDIUM: all of them). */
inline size_t first_burst(uint64_t len, const SendLimits &l)
{
	if (select_send(len, l) != Proto::Medium)
		return 1;
	const size_t seg = medium_segment(l);
	return size_t((len + seg - 1) / seg);
}

/* The first checks of every send, RMA and atomic call, in this order. */
enum class CallCheck : uint8_t { Ok, NotEnabled, NoCq, BadFlags };

inline CallCheck check_call(bool enabled, bool has_tx_cq, uint64_t flags, uint64_t allowed)
{
	if (!enabled)
		return CallCheck::NotEnabled;
	if (!has_tx_cq)
		return CallCheck::NoCq;
	if (flags & ~allowed)
		return CallCheck::BadFlags;
	return CallCheck::Ok;
}

} // namespace efa::rdm

#endif
