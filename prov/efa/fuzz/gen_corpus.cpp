/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Writes the seed corpora (prov/efa/fuzz/corpus/<harness>/): valid packets of every
 * type, built with the provider's own PktWriter (RDM), its protocol v4 Writer, and the
 * device's wire structs (efasim), with and without their optional headers. contrib/fuzz.sh --seeds runs it;
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

/* One packet: the fixed header H of `type`, optional headers per `flags`, `niov` iovs of
 * iov_len bytes, `payload` bytes; fill() sets the header's own fields. */
template <typename H, typename F>
Bytes build(PktType type, uint16_t flags, uint32_t niov, uint64_t iov_len, size_t payload, F fill)
{
	alignas(8) uint8_t buf[4096];
	PktWriter w(buf, sizeof buf);
	H *h = w.header<H>(type, kConn, flags);
	fill(*h);
	if (flags & kFlagRawAddr)
		w.raw_addr(addr(7, kConn));
	if (flags & kFlagCqData)
		w.cq_data(0xc0ffee);
	for (uint32_t i = 0; i < niov; i++)
		w.bytes(&(const RmaIov &)RmaIov{0x10000 + i * iov_len, iov_len, 0x55 + i}, sizeof(RmaIov));
	if (uint8_t *p = static_cast<uint8_t *>(w.reserve(payload)))
		for (size_t i = 0; i < payload; i++)
			p[i] = uint8_t(i * 7);
	Parsed pk;
	if (!w.ok() || parse(buf, w.size(), pk) != ParseError::None) {
		std::fprintf(stderr, "gen_corpus: built an invalid %s (%s)\n", pkt_type_name(type),
			     parse_error_str(parse(buf, w.size(), pk)));
		std::exit(1);
	}
	return Bytes(buf, buf + w.size());
}

const char *flag_suffix(uint16_t f)
{
	switch (f & (kFlagRawAddr | kFlagCqData)) {
	case kFlagRawAddr: return "_raw";
	case kFlagCqData: return "_cq";
	case kFlagRawAddr | kFlagCqData: return "_raw_cq";
	default: return "";
	}
}

/* Every RDM type, valid; `id` is the message id of ordered REQs. */
std::vector<std::pair<std::string, Bytes>> rdm_packets(uint32_t id, bool variants)
{
	std::vector<std::pair<std::string, Bytes>> v;
	auto add = [&](std::string n, Bytes b) { v.emplace_back(std::move(n), std::move(b)); };
	const uint16_t flag_sets[] = {0, kFlagRawAddr, kFlagCqData, kFlagRawAddr | kFlagCqData};
	for (uint16_t f : flag_sets) {
		if (!variants && f)
			continue;
		const std::string s = flag_suffix(f);
		for (PktType t : {PktType::EagerMsg, PktType::EagerTag})
			add(std::string(pkt_type_name(t)) + s,
			    build<EagerHdr>(t, f, 0, 0, 48, [&](EagerHdr &h) {
				    h.rtm.msg_id = id;
				    h.rtm.seg_len = 48;
				    h.rtm.tag = 0xabc;
			    }));
		for (PktType t : {PktType::MediumMsg, PktType::MediumTag})
			add(std::string(pkt_type_name(t)) + s,
			    build<MediumHdr>(t, f, 0, 0, 64, [&](MediumHdr &h) {
				    h.rtm.msg_id = id;
				    h.rtm.seg_len = 64;
				    h.msg_len = 192;
				    h.seg_off = 64;
			    }));
		for (PktType t : {PktType::LongCtsMsg, PktType::LongCtsTag})
			add(std::string(pkt_type_name(t)) + s,
			    build<LongCtsHdr>(t, f, 0, 0, 64, [&](LongCtsHdr &h) {
				    h.rtm.msg_id = id;
				    h.rtm.seg_len = 64;
				    h.msg_len = 100000;
				    h.send_id = 3;
				    h.credits = 4;
			    }));
		for (PktType t : {PktType::LongReadMsg, PktType::LongReadTag})
			add(std::string(pkt_type_name(t)) + s,
			    build<LongReadHdr>(t, f, 2, 4096, 0, [&](LongReadHdr &h) {
				    h.rtm.msg_id = id;
				    h.msg_len = 8192;
				    h.send_id = 5;
				    h.iov_count = 2;
			    }));
		add(std::string("WRITE_REQ") + s, build<WriteReqHdr>(PktType::WriteReq, f, 2, 32, 64, [&](WriteReqHdr &h) {
			    h.iov_count = 2;
			    h.seg_len = 64;
			    h.msg_len = 64;
			    h.send_id = 6;
		    }));
		add(std::string("ATOMIC_REQ") + s, build<AtomicReqHdr>(PktType::AtomicReq, f, 1, 8, 16, [&](AtomicReqHdr &h) {
			    h.msg_id = id;
			    h.iov_count = 1;
			    h.kind = uint8_t(AtomicKind::Compare);
			    h.count = 1;
		    }));
	}
	if (!variants) /* the stream harness needs only ordered REQs */
		return v;
	add("EAGER_MSG_void", build<EagerHdr>(PktType::EagerMsg, kFlagVoid, 0, 0, 0, [&](EagerHdr &h) {
		    h.rtm.msg_id = id;
		    h.rtm.tag = 3; /* a run of three refused ids */
	    }));
	add("EAGER_MSG_dc", build<EagerHdr>(PktType::EagerMsg, kFlagDeliveryComplete, 0, 0, 8, [&](EagerHdr &h) {
		    h.rtm.msg_id = id;
		    h.rtm.seg_len = 8;
	    }));
	add("READ_REQ", build<ReadReqHdr>(PktType::ReadReq, 0, 4, 1024, 0, [&](ReadReqHdr &h) {
		    h.iov_count = 4;
		    h.recv_id = 9;
		    h.msg_len = 4096;
		    h.window = 8192;
	    }));
	add("READ_REQ_raw", build<ReadReqHdr>(PktType::ReadReq, kFlagRawAddr, 1, 64, 0, [&](ReadReqHdr &h) {
		    h.iov_count = 1;
		    h.msg_len = 64;
		    h.window = 64;
	    }));
	add("HANDSHAKE", build<HandshakeHdr>(PktType::Handshake, kFlagRawAddr, 0, 0, 0, [&](HandshakeHdr &h) {
		    h.features = kFeatKnown;
		    h.max_payload = 8928;
		    h.rx_window = 16384;
	    }));
	add("CTS", build<CtsHdr>(PktType::Cts, 0, 0, 0, 0, [&](CtsHdr &h) {
		    h.send_id = 3;
		    h.recv_id = 4;
		    h.window = 65536;
	    }));
	add("DATA", build<DataHdr>(PktType::Data, 0, 0, 0, 96, [&](DataHdr &h) {
		    h.recv_id = 4;
		    h.seg_len = 96;
		    h.seg_off = 8192;
	    }));
	add("EOR", build<EorHdr>(PktType::Eor, 0, 0, 0, 0, [&](EorHdr &h) {
		    h.send_id = 1;
		    h.recv_id = 2;
	    }));
	add("RECEIPT", build<ReceiptHdr>(PktType::Receipt, 0, 0, 0, 0, [&](ReceiptHdr &h) {
		    h.send_id = 1;
		    h.msg_id = id;
	    }));
	add("READRSP", build<ReadRspHdr>(PktType::ReadRsp, 0, 0, 0, 40, [&](ReadRspHdr &h) {
		    h.recv_id = 2;
		    h.seg_len = 40;
		    h.seg_off = 40;
	    }));
	add("ATOMRSP", build<RspHdr>(PktType::AtomRsp, 0, 0, 0, 8, [&](RspHdr &h) {
		    h.recv_id = 2;
		    h.seg_len = 8;
	    }));
	add("WRITE_DATA", build<WriteDataHdr>(PktType::WriteData, kFlagCqData, 0, 0, 0, [&](WriteDataHdr &h) {
		    h.len = 4096;
	    }));
	add("ERROR", build<ErrorHdr>(PktType::Error, 0, 0, 0, 0, [&](ErrorHdr &h) {
		    h.op_id = 1;
		    h.msg_id = id;
		    h.err = 14; /* FI_EFAULT-ish: any non-zero FI_E* */
	    }));
	return v;
}

void handshakes()
{
	struct {
		const char *name;
		uint64_t features;
		uint32_t max_payload, rx_window;
	} hs[] = {
		{"all_features", kFeatKnown, 8928, 16384},
		{"no_features", 0, 8928, 16384},
		{"read_only_small_window", kFeatRdmaRead, 4096, 16},
		{"write_unsol_big_window", kFeatRdmaWrite | kFeatUnsolicitedWriteRecv, 9000, 1u << 30},
		{"future_bits", kFeatKnown | (1ull << 40), 256, 1024},
		{"minimal_mtu", kFeatDeliveryComplete, sizeof(HandshakeHdr) + sizeof(efa::RawAddr), 64},
	};
	for (const auto &x : hs) {
		const Bytes b = build<HandshakeHdr>(PktType::Handshake, kFlagRawAddr, 0, 0, 0, [&](HandshakeHdr &h) {
			h.features = x.features;
			h.max_payload = x.max_payload;
			h.rx_window = x.rx_window;
		});
		Parsed pk;
		HandshakeInfo info;
		parse(b.data(), b.size(), pk);
		if (decode_handshake(pk, info) != ParseError::None) {
			std::fprintf(stderr, "gen_corpus: handshake %s does not decode\n", x.name);
			std::exit(1);
		}
		save("fuzz_rdm_handshake", x.name, b);
	}
	/* The protocol probe (section 12.2). */
	efa::RawAddr self{};
	self.gid[0] = 0xfe;
	self.gid[1] = 0x80;
	self.qpn = 12;
	self.pad = efa::kRdmNameMark;
	self.qkey = 0x12345678;
	Bytes probe(kProbeLen);
	efa::RawAddr from;
	if (write_probe(probe.data(), probe.size(), self) != kProbeLen || !parse_probe(probe.data(), probe.size(), from)) {
		std::fprintf(stderr, "gen_corpus: the probe does not parse\n");
		std::exit(1);
	}
	save("fuzz_rdm_handshake", "probe", probe);
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
	auto pkt = [](size_t kind, uint32_t id) { return rdm_packets(id, false).at(kind % 10).second; };
	/* In order; reversed; a gap then the fill; a wrap of the id space; duplicates and
	 * past ids; medium segments sharing an id; one id beyond the window (overflow). */
	save("fuzz_rdm_stream", "in_order", stream(0, 0, {pkt(0, 0), pkt(1, 1), pkt(2, 2), pkt(9, 3)}));
	save("fuzz_rdm_stream", "reversed", stream(0, 0, {pkt(0, 3), pkt(0, 2), pkt(0, 1), pkt(0, 0)}));
	save("fuzz_rdm_stream", "gap_fill", stream(1, 100, {pkt(0, 101), pkt(2, 105), pkt(0, 100), pkt(4, 102), pkt(5, 104), pkt(6, 103)}));
	save("fuzz_rdm_stream", "wrap", stream(0, 0xfffffffe, {pkt(0, 0xffffffff), pkt(0, 0), pkt(0, 0xfffffffe), pkt(0, 1)}));
	save("fuzz_rdm_stream", "dups_and_past", stream(0, 10, {pkt(0, 10), pkt(0, 10), pkt(0, 9), pkt(0, 12), pkt(0, 12), pkt(0, 11)}));
	save("fuzz_rdm_stream", "medium_chain", stream(0, 5, {pkt(2, 6), pkt(2, 6), pkt(3, 7), pkt(2, 5), pkt(2, 5)}));
	save("fuzz_rdm_stream", "overflow", stream(0, 0, {pkt(0, 40), pkt(0, 20), pkt(0, 1), pkt(0, 0)}));
	std::vector<Bytes> many;
	for (uint32_t i = 64; i-- > 0;)
		many.push_back(pkt(i, i));
	save("fuzz_rdm_stream", "deep_reverse", stream(2, 0, many));
}

/* ---------------------------------------------------------------- software device */

Bytes datagram(uint8_t type, uint8_t flags, const void *body, size_t bsz, size_t payload)
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
		b.push_back(uint8_t(i * 13));
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
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: %s CORPUS_ROOT\n", argv[0]);
		return 2;
	}
	g_root = argv[1];
	for (auto &[name, b] : rdm_packets(42, true))
		save("fuzz_rdm_pkt", name, b);
	handshakes();
	streams();
	sim_wire();
	v4_packets();
	return 0;
}
