/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A datagram arriving at the software device (prov/efa/sim/README.md "Wire format")
 * through the checks Runtime::process_datagram runs before it acts: efasim::parse(),
 * then check_body() with the device's default limits, then, for a READ_RESP,
 * read_resp_fits() against a read whose length and outstanding bytes the input chooses.
 * What passes is used the way the runtime uses it: the payload is copied to where a
 * SEND, UD_SEND, WRITE or READ_RESP puts it, into a buffer of exactly the target's size;
 * a PF_PULL WRITE carries a PullOffer, and the segment it names is written there instead
 * (what the target's process_vm_readv would write).
 */
#include "fuzz.h"

#include "wire.h"

using namespace efasim;
using efa::fuzz::consume;
using efa::fuzz::inside;

namespace {

/* config.cpp's defaults (EFASIM_MTU, EFASIM_SEGMENT). */
constexpr uint32_t kMtu = 8928;
constexpr uint32_t kSegment = 32768;
constexpr uint64_t kMaxModelled = 1u << 16; /* larger targets: bounds checked, not copied */

/* Writes n bytes (from src, or a pattern when null) at off of a target of target_len. */
void place_bytes(const uint8_t *src, size_t n, uint64_t off, uint64_t target_len)
{
	if (target_len > kMaxModelled)
		return;
	std::unique_ptr<uint8_t[]> t(new uint8_t[target_len ? target_len : 1]);
	if (n && src)
		std::memcpy(t.get() + off, src, n);
	else if (n)
		std::memset(t.get() + off, 0xa5, n);
	consume(t.get(), target_len);
}

void place(const Parsed &pk, uint64_t off, uint64_t target_len)
{
	place_bytes(pk.payload, pk.payload_len, off, target_len);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	auto buf = efa::fuzz::exact_copy(data, size);
	Parsed pk;
	if (!parse(buf.get(), size, pk))
		return 0;
	const size_t bsz = body_size(pk.hdr->type);
	FUZZ_CHECK(bsz != SIZE_MAX);
	FUZZ_CHECK(reinterpret_cast<const uint8_t *>(pk.hdr) == buf.get());
	FUZZ_CHECK(pk.body == buf.get() + sizeof(WireHdr) && inside(pk.body, bsz, buf.get(), size));
	FUZZ_CHECK(pk.payload == pk.body + bsz && pk.payload_len == size - sizeof(WireHdr) - bsz);
	consume(*pk.hdr);
	consume(pk.body, bsz);
	consume(pk.payload, pk.payload_len);
	if (!is_data(pk.hdr->type) || pk.hdr->type == PKT_READ_REQ)
		FUZZ_CHECK(!pk.payload_len);

	if (!check_body(pk, kMtu, kSegment))
		return 0;
	switch (pk.hdr->type) {
	case PKT_NAK: {
		const auto *b = reinterpret_cast<const NakBody *>(pk.body);
		FUZZ_CHECK(b->status != 0);
		break;
	}
	case PKT_SEND: {
		const auto *b = reinterpret_cast<const SendBody *>(pk.body);
		FUZZ_CHECK(b->msg_len == pk.payload_len && pk.payload_len <= kMtu);
		place(pk, 0, b->msg_len); /* the receive buffer holds at least msg_len */
		break;
	}
	case PKT_UD_SEND: {
		const auto *b = reinterpret_cast<const SendBody *>(pk.body);
		FUZZ_CHECK(b->msg_len == pk.payload_len && pk.payload_len <= kMtu);
		place(pk, 40, 40 + uint64_t(b->msg_len)); /* after the GRH a UD receive starts with */
		break;
	}
	case PKT_WRITE: {
		const auto *b = reinterpret_cast<const WriteBody *>(pk.body);
		if (pk.hdr->flags & PF_PULL) {
			PullOffer o;
			FUZZ_CHECK(pk.payload_len == sizeof o);
			std::memcpy(&o, pk.payload, sizeof o);
			FUZZ_CHECK(o.seg_len <= kPullSegment);
			place_bytes(nullptr, o.seg_len, b->offset, b->total_len); /* pulled, not carried */
			break;
		}
		FUZZ_CHECK(pk.payload_len <= kSegment);
		place(pk, b->offset, b->total_len); /* the MR range checked is [raddr, raddr + total_len) */
		break;
	}
	case PKT_READ_RESP: {
		const auto *b = reinterpret_cast<const ReadRespBody *>(pk.body);
		if (b->reserved) {
			FUZZ_CHECK(!pk.payload_len && b->reserved <= 0xff);
			break;
		}
		/* The read it answers: length and outstanding bytes from the header's spare
		 * fields, so the fuzzer explores them together with the offset. */
		const uint64_t op_len = pk.hdr->ack_sack[0] % (kMaxModelled + 1);
		const uint64_t to_recv = pk.hdr->ack_sack[1] % (op_len + 1);
		if (read_resp_fits(b->offset, pk.payload_len, op_len, to_recv)) {
			FUZZ_CHECK(pk.payload_len <= to_recv);
			place(pk, b->offset, op_len);
		}
		break;
	}
	default: break;
	}
	return 0;
}
