/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The EFA endpoint address (FI_ADDR_EFA): 32 bytes, the layout upstream uses, so that
 * addresses are interchangeable with it:
 *
 *   GID (16) | QPN (u16) | pad (u16) | QKEY (u32) | reserved (8)
 *
 * The device reaches a QP by GID + QPN; the QKEY tells a new endpoint that reuses a
 * QPN from the old one (the device drops packets whose QKEY does not match).
 * Text form (fi_av_straddr): "fi_addr_efa://[<GID>]:<QPN>:<QKEY>"; node/service form
 * (fi_av_insertsvc, fi_getinfo): node = the GID in IPv6 text, service = "<QPN>:<QKEY>".
 *
 * `pad` and `reserved` are 0 in every name we give out, as in upstream's: upstream keys
 * its AV (and the implicit AV of senders it learns from REQ raw address headers) by all
 * 32 bytes, so a name must equal the raw address header our REQs carry, byte for byte.
 */
#ifndef EFA_ADDR_H
#define EFA_ADDR_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace efa {

struct RawAddr {
	uint8_t gid[16];
	uint16_t qpn;
	uint16_t pad;
	uint32_t qkey;
	uint64_t reserved;

	bool same_qp(const RawAddr &o) const { return qpn == o.qpn && std::memcmp(gid, o.gid, 16) == 0; }
	bool operator==(const RawAddr &o) const { return same_qp(o) && qkey == o.qkey; }
};
static_assert(sizeof(RawAddr) == 32, "FI_ADDR_EFA is 32 bytes");

inline constexpr size_t kAddrLen = sizeof(RawAddr);

/* "fi_addr_efa://[fe80::...]:12:305419896" */
std::string addr_to_string(const RawAddr &a);
/* Parses the text form above. */
bool addr_from_string(const char *s, RawAddr &out);
/* node = IPv6 text of a GID; service = "<qpn>" or "<qpn>:<qkey>" (either may be null). */
bool addr_from_node_service(const char *node, const char *service, RawAddr &out);
/* IPv6 text of a GID. */
std::string gid_to_string(const uint8_t gid[16]);

} // namespace efa

#endif
