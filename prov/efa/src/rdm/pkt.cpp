/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The HANDSHAKE's meaning (pkt.h; docs/protocol.md section 3). */
#include "rdm/pkt.h"

namespace efa::rdm {

v4::Error decode_handshake(const Parsed &pk, HandshakeInfo &out)
{
	out = HandshakeInfo{};
	if (pk.extra_count) {
		std::memcpy(&out.features, pk.extra_info, sizeof out.features);
	}
	out.ext = pk.payload_len >= sizeof v4::kExtMagic &&
		  std::memcmp(pk.payload, v4::kExtMagic, sizeof v4::kExtMagic) == 0;
	return v4::Error::None;
}

size_t write_handshake(void *buf, size_t cap, uint64_t features, uint32_t connid, uint32_t device_version)
{
	v4::Writer w(buf, cap);
	v4::Handshake *h = w.header<v4::Handshake>(Type::Handshake, v4::kFlagConnId | v4::kHsDeviceVersion);
	if (!h)
		return 0;
	h->nextra_p3 = 3 + 1;
	w.extra_info(&features, 1);
	w.u32(connid); /* the optional fields are 8 bytes each */
	w.u32(0);
	w.u32(device_version);
	w.u32(0);
	w.bytes(v4::kExtMagic, sizeof v4::kExtMagic);
	return w.ok() ? w.size() : 0;
}

} // namespace efa::rdm
