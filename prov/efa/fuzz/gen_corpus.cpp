/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Writes the seed corpora (prov/efa/fuzz/corpus/<harness>/): valid packets of every
 * type, built with the provider's protocol v4 Writer and the device's wire structs
 * (efasim), with and without their optional headers. contrib/fuzz.sh --seeds runs it;
 * its output is committed.
 */
#include "rdm/pkt.h"
#include "rdm/v4/codec.h"
#include "wire.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace efa::rdm;
using Bytes = std::vector<uint8_t>;

namespace {

fs::path g_root;

void save(const char *harness, const std::string &name, const Bytes &b)
{
	const fs::path dir = g_root / harness;
	fs::create_directories(dir);
	std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
	out.write(reinterpret_cast<const char *>(b.data()), std::streamsize(b.size()));
	if (!out)
		std::fprintf(stderr, "gen_corpus: cannot write %s/%s\n", dir.c_str(), name.c_str());
}

efa::RawAddr addr(uint16_t qpn, uint32_t qkey)
{
	efa::RawAddr a{};
	a.gid[0] = 0xfe;
	a.gid[1] = 0x80;
	a.gid[15] = uint8_t(qpn);
	a.qpn = qpn;
	a.qkey = qkey;
	return a;
}

constexpr uint32_t kConn = 0x1234;

/* An ordered REQ of v4 with message id `id`, of kind k % 6: EAGER (untagged, tagged,
 * delivery complete), MEDIUM, WRITE_RTA, EXT_VOID; every one checked by v4::parse. */
Bytes ordered(size_t k, uint32_t id)
{
	namespace v4 = efa::rdm::v4;
	Bytes b(256);
	v4::Writer w(b.data(), b.size());
	const v4::RmaIov iov{0x10000, 8, 0x33};
	switch (k % 6) {
	case 0:
		w.header<v4::EagerRtm>(v4::Type::EagerMsgRtm, v4::kFlagConnId)->r.msg_id = id;
		w.connid(kConn);
		w.bytes("eager", 5);
		break;
	case 1:
		w.header<v4::EagerRtm>(v4::Type::EagerTagRtm, v4::kReqRawAddr)->r.msg_id = id;
		w.u64(0x77);
		w.raw_addr(addr(7, kConn));
		w.bytes("tagged", 6);
		break;
	case 2: {
		v4::DcEagerRtm *h = w.header<v4::DcEagerRtm>(v4::Type::DcEagerMsgRtm, v4::kFlagConnId | v4::kReqCqData);
		h->r.msg_id = id;
		h->send_id = 9;
		w.cq_data(0xc0ffee);
		w.connid(kConn);
		w.bytes("dc", 2);
		break;
	}
	case 3: {
		v4::MediumRtm *h = w.header<v4::MediumRtm>(v4::Type::MediumMsgRtm, v4::kFlagConnId);
		h->r.msg_id = id;
		h->msg_length = 20;
		h->seg_offset = 10;
		w.connid(kConn);
		w.bytes("0123456789", 10);
		break;
	}
	case 4: {
		v4::Rta *h = w.header<v4::Rta>(v4::Type::WriteRta, v4::kFlagConnId);
		h->msg_id = id;
		h->rma_iov_count = 1;
		h->atomic_datatype = 7; /* FI_UINT64 */
		h->atomic_op = 2;	/* FI_SUM */
		w.iovs(&iov, 1);
		w.connid(kConn);
		w.u64(1);
		break;
	}
	default: {
		v4::ExtVoid *h = w.header<v4::ExtVoid>(v4::Type::ExtVoid, v4::kFlagConnId);
		h->connid = kConn;
		h->msg_id = id;
		h->count = 1;
		break;
	}
	}
	b.resize(w.size());
	Parsed pk;
	if (!w.ok() || v4::parse(b.data(), b.size(), pk) != v4::Error::None || !is_ordered(pk) || msg_id_of(pk) != id) {
		std::fprintf(stderr, "gen_corpus: built an invalid ordered packet of kind %zu\n", k % 6);
		std::exit(1);
	}
	return b;
}

/* HANDSHAKEs: ours (write_handshake), and v4 ones as other nodes send them. */
void handshakes()
{
	namespace v4 = efa::rdm::v4;
	const uint64_t ours = v4::kExtraRdmaRead | v4::kExtraDeliveryComplete | v4::kExtraConnIdHeader |
			      v4::kExtraRdmaWrite | v4::kExtraUnsolicitedWriteRecv;
	auto check = [](const char *name, const Bytes &b) {
		Parsed pk;
		HandshakeInfo info;
		if (v4::parse(b.data(), b.size(), pk) != v4::Error::None || pk.type != v4::Type::Handshake ||
		    decode_handshake(pk, info) != v4::Error::None) {
			std::fprintf(stderr, "gen_corpus: handshake %s does not decode\n", name);
			std::exit(1);
		}
		save("fuzz_rdm_handshake", name, b);
	};
	for (uint64_t f : {ours, uint64_t(0), uint64_t(v4::kExtraDeliveryComplete)}) {
		Bytes b(128);
		b.resize(write_handshake(b.data(), b.size(), f, kConn, 0xefa1));
		check(f == ours ? "ours_all" : f ? "ours_dc" : "ours_none", b);
	}
	/* As upstream sends it: connid, host id and device version, no extension. */
	Bytes b(128);
	v4::Writer w(b.data(), b.size());
	w.header<v4::Handshake>(v4::Type::Handshake, v4::kFlagConnId | v4::kHsHostId | v4::kHsDeviceVersion)->nextra_p3 = 5;
	const uint64_t extra[2] = {v4::kExtraRdmaRead | v4::kExtraDeliveryComplete | v4::kExtraRunt | v4::kExtraReadNack,
				   1ull << 3};
	w.extra_info(extra, 2);
	w.u64(kConn);
	w.u64(0x1234abcd);
	w.u64(0xefa0);
	b.resize(w.size());
	check("upstream_two_words", b);
}

/* Streams: window exponent, first id, then [u16 length, packet]... */
void streams()
{
	auto stream = [](uint8_t wexp, uint32_t first, const std::vector<Bytes> &pkts) {
		Bytes s{wexp};
		for (int i = 0; i < 4; i++)
			s.push_back(uint8_t(first >> (8 * i)));
		for (const Bytes &p : pkts) {
			s.push_back(uint8_t(p.size()));
			s.push_back(uint8_t(p.size() >> 8));
			s.insert(s.end(), p.begin(), p.end());
		}
		return s;
	};
	auto pkt = [](size_t kind, uint32_t id) { return ordered(kind, id); };
	/* In order; reversed; a gap then the fill; a wrap of the id space; duplicates and
	 * past ids; medium segments sharing an id; one id beyond the window (overflow). */
	save("fuzz_rdm_stream", "in_order", stream(0, 0, {pkt(0, 0), pkt(1, 1), pkt(2, 2), pkt(5, 3)}));
	save("fuzz_rdm_stream", "reversed", stream(0, 0, {pkt(0, 3), pkt(0, 2), pkt(0, 1), pkt(0, 0)}));
	save("fuzz_rdm_stream", "gap_fill", stream(1, 100, {pkt(0, 101), pkt(2, 105), pkt(0, 100), pkt(4, 102), pkt(5, 104), pkt(1, 103)}));
	save("fuzz_rdm_stream", "wrap", stream(0, 0xfffffffe, {pkt(0, 0xffffffff), pkt(0, 0), pkt(0, 0xfffffffe), pkt(0, 1)}));
	save("fuzz_rdm_stream", "dups_and_past", stream(0, 10, {pkt(0, 10), pkt(0, 10), pkt(0, 9), pkt(0, 12), pkt(0, 12), pkt(0, 11)}));
	save("fuzz_rdm_stream", "medium_chain", stream(0, 5, {pkt(3, 6), pkt(3, 6), pkt(3, 7), pkt(3, 5), pkt(3, 5)}));
	save("fuzz_rdm_stream", "overflow", stream(0, 0, {pkt(0, 40), pkt(0, 20), pkt(0, 1), pkt(0, 0)}));
	std::vector<Bytes> many;
	for (uint32_t i = 64; i-- > 0;)
		many.push_back(pkt(i, i));
	save("fuzz_rdm_stream", "deep_reverse", stream(2, 0, many));
}

/* ---------------------------------------------------------------- software device */

Bytes datagram(uint8_t type, uint8_t flags, const void *body, size_t bsz, size_t payload,
	       const void *payload_bytes = nullptr)
{
	using namespace efasim;
	WireHdr h{};
	h.magic = kWireMagic;
	h.version = kWireVersion;
	h.type = type;
	h.flags = flags;
	h.src_qpn = 3;
	h.dst_qpn = 4;
	h.qkey = kConn;
	h.src_gid[0] = 0xfe;
	h.src_gid[1] = 0x80;
	h.epoch = 0x5eed;
	h.seq = 17;
	h.snd_una = 15;
	if (flags & PF_ACK) {
		h.ack_epoch = 0x5eef;
		h.ack_cum = 9;
		h.ack_sack[0] = 0x5;
	}
	h.body_len = uint32_t(bsz + payload);
	Bytes b(reinterpret_cast<uint8_t *>(&h), reinterpret_cast<uint8_t *>(&h) + sizeof h);
	b.insert(b.end(), static_cast<const uint8_t *>(body), static_cast<const uint8_t *>(body) + bsz);
	for (size_t i = 0; i < payload; i++)
		b.push_back(payload_bytes ? static_cast<const uint8_t *>(payload_bytes)[i] : uint8_t(i * 13));
	efasim::Parsed pk;
	if (!efasim::parse(b.data(), b.size(), pk) || !check_body(pk, 8928, 32768)) {
		std::fprintf(stderr, "gen_corpus: built an invalid datagram of type %u\n", type);
		std::exit(1);
	}
	return b;
}

void sim_wire()
{
	using namespace efasim;
	const char *d = "fuzz_sim_wire";
	save(d, "ack", datagram(PKT_ACK, PF_ACK, nullptr, 0, 0));
	NakBody nak{17, 10 /* REMOTE_RNR */, 2, {}};
	save(d, "nak_rnr", datagram(PKT_NAK, PF_ACK, &nak, sizeof nak, 0));
	nak.status = 7; /* REMOTE_BAD_ADDRESS */
	save(d, "nak_bad_address", datagram(PKT_NAK, PF_ACK, &nak, sizeof nak, 0));
	SendBody send{};
	send.msg_len = 100;
	save(d, "send", datagram(PKT_SEND, 0, &send, sizeof send, 100));
	send.imm = 0x01020304;
	save(d, "send_imm_ack", datagram(PKT_SEND, PF_IMM | PF_ACK | PF_HINT, &send, sizeof send, 100));
	send.msg_len = 0;
	save(d, "send_empty", datagram(PKT_SEND, 0, &send, sizeof send, 0));
	WriteBody wr{};
	wr.rkey = 0x77;
	wr.raddr = 0x100000;
	wr.total_len = 300;
	wr.offset = 0;
	save(d, "write_first", datagram(PKT_WRITE, 0, &wr, sizeof wr, 200));
	wr.offset = 200;
	wr.last = 1;
	wr.imm = 9;
	save(d, "write_last_imm", datagram(PKT_WRITE, PF_IMM, &wr, sizeof wr, 100));
	ReadReqBody rr{0x77, 0x10003, 0x100000, 5000};
	save(d, "read_req", datagram(PKT_READ_REQ, PF_ACK, &rr, sizeof rr, 0));
	ReadRespBody rs{0x10003, 0, 64};
	Bytes resp = datagram(PKT_READ_RESP, 0, &rs, sizeof rs, 128);
	/* The harness takes the read's length and outstanding bytes from ack_sack. */
	WireHdr *h = reinterpret_cast<WireHdr *>(resp.data());
	h->ack_sack[0] = 5000;
	h->ack_sack[1] = 4000;
	save(d, "read_resp", resp);
	rs.reserved = 7; /* REMOTE_BAD_ADDRESS */
	save(d, "read_resp_error", datagram(PKT_READ_RESP, 0, &rs, sizeof rs, 0));
	rr.dma_pid = 4242; /* a loopback DMA offer, and the placed answer */
	rr.dma_nsge = 2;
	rr.dma_nonce = 0x5151;
	rr.dma_nonce_addr = 0x7000;
	rr.dma_addr[0] = 0x8000;
	rr.dma_len[0] = 1000;
	rr.dma_addr[1] = 0x9000;
	rr.dma_len[1] = 4000;
	save(d, "read_req_dma", datagram(PKT_READ_REQ, PF_ACK, &rr, sizeof rr, 0));
	rs.reserved = 0;
	rs.offset = 0;
	save(d, "read_resp_placed", datagram(PKT_READ_RESP, PF_PLACED, &rs, sizeof rs, 0));
	WriteBody pw{};
	pw.rkey = 0x55;
	pw.raddr = 0x100000;
	pw.total_len = 3u << 20;
	pw.offset = 1u << 20;
	PullOffer po{};
	po.pid = 4242; /* a pulled segment: the offer instead of the data */
	po.nsge = 2;
	po.token = 0x6161;
	po.token_addr = 0x7000;
	po.addr[0] = 0x8000;
	po.len[0] = 1u << 20;
	po.addr[1] = 0x200000;
	po.len[1] = 2u << 20;
	po.seg_len = 1u << 20;
	save(d, "write_pull", datagram(PKT_WRITE, PF_PULL, &pw, sizeof pw, sizeof po, &po));
}

} // namespace

/* Protocol v4: one packet of each family, with and without the optional headers. */
void v4_packets()
{
	namespace v4 = efa::rdm::v4;
	const efa::RawAddr a = addr(77, 0x1234567);
	const v4::RmaIov iov{0x10000, 4096, 0x33};
	auto emit = [](const std::string &name, auto &&build) {
		Bytes b(512);
		v4::Writer w(b.data(), b.size());
		build(w);
		b.resize(w.size());
		save("fuzz_v4_pkt", name, b);
	};
	for (int opt = 0; opt < 3; opt++) {
		/* opt 0: no optional header; 1: raw address + CQ data; 2: connid */
		const uint16_t f = opt == 1 ? (v4::kReqRawAddr | v4::kReqCqData) : opt == 2 ? v4::kFlagConnId : 0;
		auto tail = [&](v4::Writer &w) {
			if (opt == 1) {
				w.raw_addr(a);
				w.cq_data(0xdeadbeef);
			} else if (opt == 2) {
				w.connid(0x1234567);
			}
		};
		const std::string sfx = "-opt" + std::to_string(opt);
		emit("v4-eager-tagrtm" + sfx, [&](v4::Writer &w) {
			w.header<v4::EagerRtm>(v4::Type::EagerTagRtm, f | v4::kReqMsg | v4::kReqTagged)->r.msg_id = 3;
			w.u64(0x77);
			tail(w);
			w.bytes("payload", 7);
		});
		emit("v4-medium-msgrtm" + sfx, [&](v4::Writer &w) {
			v4::MediumRtm *h = w.header<v4::MediumRtm>(v4::Type::MediumMsgRtm, f | v4::kReqMsg);
			h->msg_length = 100;
			h->seg_offset = 90;
			tail(w);
			w.bytes("0123456789", 10);
		});
		emit("v4-dc-longcts-msgrtm" + sfx, [&](v4::Writer &w) {
			v4::LongCtsRtm *h = w.header<v4::LongCtsRtm>(v4::Type::DcLongCtsMsgRtm, f | v4::kReqMsg);
			h->msg_length = 100000;
			h->send_id = 5;
			h->credit_request = 4;
			tail(w);
			w.bytes("abc", 3);
		});
		emit("v4-longread-msgrtm" + sfx, [&](v4::Writer &w) {
			v4::LongReadRtm *h = w.header<v4::LongReadRtm>(v4::Type::LongReadMsgRtm, f | v4::kReqMsg);
			h->msg_length = 4096;
			h->read_iov_count = 1;
			tail(w);
			w.iovs(&iov, 1);
		});
		emit("v4-runtread-tagrtm" + sfx, [&](v4::Writer &w) {
			v4::RuntRtm *h = w.header<v4::RuntRtm>(v4::Type::RuntReadTagRtm, f | v4::kReqMsg | v4::kReqTagged);
			h->msg_length = 4096;
			h->credit_or_iovs = 1;
			h->runt_length = 100;
			w.u64(9);
			tail(w);
			w.iovs(&iov, 1);
			w.bytes("runt", 4);
		});
		emit("v4-longcts-rtw" + sfx, [&](v4::Writer &w) {
			v4::LongCtsRtw *h = w.header<v4::LongCtsRtw>(v4::Type::LongCtsRtw, f | v4::kReqRma);
			h->rma_iov_count = 1;
			h->msg_length = 4096;
			w.iovs(&iov, 1);
			tail(w);
			w.bytes("w", 1);
		});
		emit("v4-short-rtr" + sfx, [&](v4::Writer &w) {
			v4::Rtr *h = w.header<v4::Rtr>(v4::Type::ShortRtr, f | v4::kReqRma);
			h->rma_iov_count = 1;
			h->msg_length = 8;
			w.iovs(&iov, 1);
			tail(w);
		});
		emit("v4-compare-rta" + sfx, [&](v4::Writer &w) {
			v4::Rta *h = w.header<v4::Rta>(v4::Type::CompareRta, f | v4::kReqAtomic);
			h->rma_iov_count = 1;
			w.iovs(&iov, 1);
			tail(w);
			w.u64(1);
			w.u64(2);
		});
	}
	emit("v4-handshake", [&](v4::Writer &w) {
		w.header<v4::Handshake>(v4::Type::Handshake, v4::kFlagConnId | v4::kHsHostId | v4::kHsDeviceVersion)->nextra_p3 = 4;
		const uint64_t extra = v4::kExtraRdmaRead | v4::kExtraDeliveryComplete | v4::kExtraConnIdHeader;
		w.extra_info(&extra, 1);
		w.u64(0x1234567);
		w.u64(0xabcdef);
		w.u64(0xefa1);
	});
	emit("v4-cts", [&](v4::Writer &w) {
		v4::Cts *h = w.header<v4::Cts>(v4::Type::Cts, v4::kFlagConnId);
		h->recv_length = 8192;
	});
	emit("v4-ctsdata", [&](v4::Writer &w) {
		w.header<v4::CtsData>(v4::Type::CtsData, v4::kFlagConnId)->seg_length = 4;
		w.u64(0x1234567);
		w.bytes("data", 4);
	});
	emit("v4-readrsp", [&](v4::Writer &w) {
		w.header<v4::ReadRsp>(v4::Type::ReadRsp, 0)->seg_length = 2;
		w.bytes("rr", 2);
	});
	emit("v4-atomrsp", [&](v4::Writer &w) {
		w.header<v4::AtomRsp>(v4::Type::AtomRsp, 0)->seg_length = 8;
		w.u64(5);
	});
	emit("v4-eor", [&](v4::Writer &w) { w.header<v4::Eor>(v4::Type::Eor, v4::kFlagConnId)->send_id = 1; });
	emit("v4-read-nack", [&](v4::Writer &w) { w.header<v4::ReadNack>(v4::Type::ReadNack, 0)->recv_id = 2; });
	emit("v4-receipt", [&](v4::Writer &w) { w.header<v4::Receipt>(v4::Type::Receipt, 0)->msg_id = 3; });
	emit("ext-error", [&](v4::Writer &w) {
		v4::ExtError *h = w.header<v4::ExtError>(v4::Type::ExtError, v4::kFlagConnId);
		h->op_id = 0x80000001;
		h->err = 13;
	});
	emit("ext-write-data", [&](v4::Writer &w) {
		v4::ExtWriteData *h = w.header<v4::ExtWriteData>(v4::Type::ExtWriteData, v4::kFlagConnId);
		h->cq_data = 0xfeed;
		h->length = 4096;
	});
	emit("ext-void", [&](v4::Writer &w) {
		v4::ExtVoid *h = w.header<v4::ExtVoid>(v4::Type::ExtVoid, v4::kFlagConnId);
		h->msg_id = 17;
		h->count = 3;
	});
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: %s CORPUS_ROOT\n", argv[0]);
		return 2;
	}
	g_root = argv[1];
	handshakes();
	streams();
	sim_wire();
	v4_packets();
	return 0;
}
