/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Malformed packets at an efa endpoint, through the public API (objtest.h), delivered
 * by a socket that speaks the software device's wire format.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_rma.h>

#include <criterion/criterion.h>

#include "objtest.h"

#include "../sim/wire.h"
#include "rdm/pkt.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <vector>

using namespace objtest;

/* ------------------------------------------------------------------ malformed packets */

namespace {

/* stderr into a string while it lives. */
class CaptureStderr {
public:
	CaptureStderr()
	{
		fflush(stderr);
		file_ = tmpfile();
		cr_assert_not_null(file_);
		saved_ = dup(2);
		dup2(fileno(file_), 2);
	}
	std::string end()
	{
		fflush(stderr);
		dup2(saved_, 2);
		close(saved_);
		std::string s;
		rewind(file_);
		for (int ch; (ch = fgetc(file_)) != EOF;)
			s += char(ch);
		fclose(file_);
		return s;
	}

private:
	FILE *file_ = nullptr;
	int saved_ = -1;
};

/* A protocol v4 packet written with the provider's own writer: the mandatory header H
 * (fill() sets its fields), then `payload` bytes. */
template <typename H, typename F>
std::vector<uint8_t> rdm_packet(efa::rdm::v4::Type type, uint16_t flags, size_t payload, F fill)
{
	alignas(8) uint8_t buf[512];
	efa::rdm::v4::Writer w(buf, sizeof buf);
	fill(*w.header<H>(type, flags));
	if (void *p = w.reserve(payload))
		std::memset(p, 0x33, payload);
	cr_assert(w.ok());
	return std::vector<uint8_t>(buf, buf + w.size());
}

} // namespace

/* The efa fabric (the RDM protocol), at info level for the endpoint's closing line with
 * its drop counters. */
TestSuite(objects_wire, .init = [] {
	setenv("FI_LOG_LEVEL", "info", 1);
	setup_fabric("efa");
}, .fini = teardown, .timeout = 60);

/*
 * Packets an efa endpoint must not trust, delivered by the device as SENDs from a QP the
 * endpoint never heard of (a UDP socket speaking the device's wire format, whose address
 * matches the GID/QPN it claims): too short, another protocol version, a MEDIUM segment
 * beyond its message, and a HANDSHAKE whose extra_info count is impossible. Each is dropped and
 * counted (the endpoint's closing line says how many), the user is told once what to do,
 * and the endpoint then receives a real message intact.
 */
Test(objects_wire, malformed_packets_are_dropped_counted_and_logged_once)
{
	fid_av *av = open_av(FI_AV_TABLE);
	Ep a = open_ep(av), b = open_ep(av);
	fi_addr_t fa;
	cr_assert_eq(fi_av_insert(av, a.addr, 1, &fa, 0, nullptr), 1);
	efa::RawAddr ea;
	std::memcpy(&ea, a.addr, sizeof ea);

	/* A socket on the device's address; the QPN its port stands for. */
	const uint32_t base = uint32_t(ea.gid[4] << 8 | ea.gid[5]);
	sockaddr_in qpa{};
	qpa.sin_family = AF_INET;
	qpa.sin_port = htons(uint16_t(base + ea.qpn));
	std::memcpy(&qpa.sin_addr.s_addr, &ea.gid[12], 4);
	const int s = socket(AF_INET, SOCK_DGRAM, 0);
	cr_assert_geq(s, 0);
	sockaddr_in me{};
	me.sin_family = AF_INET;
	me.sin_addr = qpa.sin_addr;
	cr_assert_eq(bind(s, reinterpret_cast<sockaddr *>(&me), sizeof me), 0);
	socklen_t ml = sizeof me;
	cr_assert_eq(getsockname(s, reinterpret_cast<sockaddr *>(&me), &ml), 0);
	cr_assert_gt(ntohs(me.sin_port), base);
	const uint16_t my_qpn = uint16_t(ntohs(me.sin_port) - base);

	using namespace efa::rdm;
	std::vector<std::vector<uint8_t>> bad;
	bad.push_back(std::vector<uint8_t>{uint8_t(Type::EagerMsgRtm), v4::kVersion, 0});
	bad.push_back(rdm_packet<v4::EagerRtm>(Type::EagerMsgRtm, 0, 8, [](v4::EagerRtm &h) { h.r.b.version = 9; }));
	bad.push_back(rdm_packet<v4::MediumRtm>(Type::MediumMsgRtm, 0, 8, [](v4::MediumRtm &h) {
		h.msg_length = 100;
		h.seg_offset = 96; /* 8 bytes from 96 end past 100 */
	}));
	bad.push_back(rdm_packet<v4::Handshake>(Type::Handshake, 0, 0, [](v4::Handshake &h) { h.nextra_p3 = 2; }));

	CaptureStderr cap;
	uint32_t seq = 0;
	for (const auto &pkt : bad) {
		efasim::WireHdr h{};
		h.magic = efasim::kWireMagic;
		h.version = efasim::kWireVersion;
		h.type = efasim::PKT_SEND;
		h.src_qpn = my_qpn;
		h.dst_qpn = ea.qpn;
		h.qkey = ea.qkey;
		std::memcpy(h.src_gid, ea.gid, 16);
		h.epoch = 1;
		h.seq = seq++;
		efasim::SendBody sb{};
		sb.msg_len = uint32_t(pkt.size());
		h.body_len = uint32_t(sizeof sb + pkt.size());
		std::vector<uint8_t> d(sizeof h + sizeof sb + pkt.size());
		std::memcpy(d.data(), &h, sizeof h);
		std::memcpy(d.data() + sizeof h, &sb, sizeof sb);
		std::memcpy(d.data() + sizeof h + sizeof sb, pkt.data(), pkt.size());
		cr_assert_eq(sendto(s, d.data(), d.size(), 0, reinterpret_cast<sockaddr *>(&qpa), sizeof qpa),
			     ssize_t(d.size()));
	}

	/* The device acknowledges what it delivered: once it acknowledged all of them, their
	 * receive completions are queued ahead of anything sent later. */
	bool acked = false;
	for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	     !acked && std::chrono::steady_clock::now() < end;) {
		pollfd pfd{s, POLLIN, 0};
		if (poll(&pfd, 1, 1000) != 1)
			continue;
		alignas(8) uint8_t in[9000];
		const ssize_t n = recv(s, in, sizeof in, 0);
		efasim::Parsed pk;
		if (n > 0 && efasim::parse(in, size_t(n), pk) && (pk.hdr->flags & efasim::PF_ACK) &&
		    pk.hdr->ack_epoch == 1 && efasim::seq_le(seq, pk.hdr->ack_cum))
			acked = true;
	}
	cr_assert(acked, "the device did not acknowledge the %u datagrams", seq);

	/* A real message after them: once it is received, they have all been looked at. */
	char rbuf[64] = {}, sbuf[64];
	for (size_t i = 0; i < sizeof sbuf; i++)
		sbuf[i] = char(i * 5 + 3);
	fid_mr *rmr = nullptr, *smr = nullptr;
	cr_assert_eq(fi_mr_reg(g.dom, rbuf, sizeof rbuf, FI_RECV, 0, 0, 0, &rmr, nullptr), 0);
	cr_assert_eq(fi_mr_reg(g.dom, sbuf, sizeof sbuf, FI_SEND, 0, 0, 0, &smr, nullptr), 0);
	int rctx = 0, sctx = 0;
	cr_assert_eq(fi_recv(a.ep, rbuf, sizeof rbuf, fi_mr_desc(rmr), FI_ADDR_UNSPEC, &rctx), 0);
	cr_assert_eq(fi_send(b.ep, sbuf, sizeof sbuf, fi_mr_desc(smr), fa, &sctx), 0);
	fi_cq_data_entry e{};
	bool got_recv = false, got_send = false;
	for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	     !(got_recv && got_send) && std::chrono::steady_clock::now() < end;) {
		if (fi_cq_read(a.cq, &e, 1) == 1) {
			cr_assert_eq(e.op_context, &rctx);
			got_recv = true;
		}
		if (fi_cq_read(b.cq, &e, 1) == 1) {
			cr_assert_eq(e.op_context, &sctx);
			got_send = true;
		}
	}
	close(s);
	if (!(got_recv && got_send)) {
		const std::string logged = cap.end();
		cr_assert_fail("no completion after the malformed packets (recv %d, send %d); log: %s", got_recv,
			       got_send, logged.substr(logged.size() > 4000 ? logged.size() - 4000 : 0).c_str());
	}
	cr_assert_eq(std::memcmp(rbuf, sbuf, sizeof sbuf), 0);
	close_ep(a);
	const std::string logged = cap.end();
	cr_assert_neq(logged.find("malformed packet from QP " + std::to_string(my_qpn)), std::string::npos,
		      "no warning naming the sender: '%s'", logged.c_str());
	cr_assert_neq(logged.find("does not follow protocol v4"), std::string::npos);
	cr_assert_eq(logged.find("malformed packet"), logged.rfind("malformed packet"), "warned more than once");
	cr_assert_neq(logged.find("dropped 3 malformed"), std::string::npos, "not counted: '%s'", logged.c_str());
	/* The packet of version 9 is another protocol's (protocol.md section 2): counted
	 * apart, with a warning of its own; its sender is unknown, so no peer fails. */
	cr_assert_neq(logged.find("1 of another protocol version"), std::string::npos, "not counted: '%s'",
		      logged.c_str());
	cr_assert_neq(logged.find("a packet of RDM protocol version 9"), std::string::npos, "no warning: '%s'",
		      logged.c_str());
	close_ep(b);
	cr_assert_eq(fi_close(&rmr->fid), 0);
	cr_assert_eq(fi_close(&smr->fid), 0);
	cr_assert_eq(fi_close(&av->fid), 0);
}
