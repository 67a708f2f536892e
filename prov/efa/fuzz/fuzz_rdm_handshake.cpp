/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A received HANDSHAKE (docs/protocol.md section 3) through the code the endpoint
 * runs: v4::parse(), then decode_handshake() (Ep::handle_handshake keeps only what it
 * returns). What an accepted one says survives our own writer: writing its extra
 * features as Ep::send_handshake does gives a packet that parses as a HANDSHAKE with
 * the same word 0, our connid, and our extension's mark.
 */
#include "fuzz.h"

#include "rdm/pkt.h"

using namespace efa::rdm;
using efa::fuzz::consume;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	auto buf = efa::fuzz::exact_copy(data, size);
	Parsed pk;
	if (v4::parse(buf.get(), size, pk) != v4::Error::None || pk.type != Type::Handshake)
		return 0;
	HandshakeInfo hs;
	FUZZ_CHECK(decode_handshake(pk, hs) == v4::Error::None);
	consume(hs);
	FUZZ_CHECK(!hs.features || pk.extra_count >= 1);
	FUZZ_CHECK(!hs.ext || pk.payload_len >= sizeof v4::kExtMagic);

	/* Round trip through write_handshake, the writer of every HANDSHAKE sent. */
	alignas(8) uint8_t out[64];
	const uint32_t connid = pk.has_connid ? pk.connid : 0x5eed;
	const size_t len = write_handshake(out, sizeof out, hs.features, connid, 0xefa0);
	FUZZ_CHECK(len > 0 && len <= sizeof out);
	Parsed pk2;
	HandshakeInfo hs2;
	FUZZ_CHECK(v4::parse(out, len, pk2) == v4::Error::None && pk2.type == Type::Handshake);
	FUZZ_CHECK(decode_handshake(pk2, hs2) == v4::Error::None);
	FUZZ_CHECK(hs2.features == hs.features && hs2.ext && pk2.has_connid && pk2.connid == connid);
	return 0;
}
