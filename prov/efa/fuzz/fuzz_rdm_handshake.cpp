/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A received HANDSHAKE (docs/protocol.md section 4) through the code the endpoint runs:
 * parse(), then decode_handshake() (Ep::handle_handshake keeps only what it returns);
 * and the protocol probe (section 12.2) through parse_probe().
 * An accepted handshake announces only known features, a window the reorder buffer
 * accepts and an MTU that fits the packet itself; encoding the decoded values again the
 * way Ep::send_handshake does gives a packet that decodes to the same values.
 */
#include "fuzz.h"

#include "rdm/pkt.h"

#include <bit>

using namespace efa::rdm;
using efa::fuzz::consume;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	auto buf = efa::fuzz::exact_copy(data, size);
	/* The protocol probe (section 12.2), checked before parse() in Ep::rx_done: an
	 * accepted one names an address whose QKEY is its connection id, and writing a
	 * probe from that address gives one that names it again. */
	efa::RawAddr from;
	if (parse_probe(buf.get(), size, from)) {
		consume(from);
		FUZZ_CHECK(size >= kProbeLen && from.qpn != 0);
		alignas(8) uint8_t probe[kProbeLen];
		efa::RawAddr again;
		FUZZ_CHECK(write_probe(probe, sizeof probe, from) == kProbeLen);
		FUZZ_CHECK(parse_probe(probe, sizeof probe, again) && again == from && again.pad == from.pad);
		return 0;
	}
	Parsed pk;
	if (parse(buf.get(), size, pk) != ParseError::None)
		return 0;
	HandshakeInfo hs;
	const ParseError e = decode_handshake(pk, hs);
	FUZZ_CHECK(e != ParseError::None || pk.type == PktType::Handshake);
	if (e != ParseError::None)
		return 0;
	consume(hs);
	FUZZ_CHECK(!(hs.features & ~uint64_t(kFeatKnown)));
	FUZZ_CHECK(std::has_single_bit(hs.rx_window) && hs.rx_window >= 16 && hs.rx_window <= (1u << 30));
	FUZZ_CHECK(hs.max_payload >= size);
	FUZZ_CHECK(hs.addr.qkey == pk.base->conn);

	/* Round trip through write_handshake, the writer of every HANDSHAKE (and probe) sent. */
	alignas(8) uint8_t out[sizeof(HandshakeHdr) + sizeof(efa::RawAddr)];
	const size_t len = write_handshake(out, sizeof out, hs);
	FUZZ_CHECK(len == sizeof out);
	Parsed pk2;
	HandshakeInfo hs2;
	FUZZ_CHECK(parse(out, len, pk2) == ParseError::None);
	FUZZ_CHECK(decode_handshake(pk2, hs2) == ParseError::None);
	FUZZ_CHECK(hs2.features == hs.features && hs2.max_payload == hs.max_payload &&
		   hs2.rx_window == hs.rx_window && hs2.addr == hs.addr);
	return 0;
}
