/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_many_peers: one server endpoint, 64 client endpoints (-N to change) in the client
 * process, all sending at once.
 *
 * The client opens N endpoints on one domain and AV: the first half with CQs of their
 * own, the second half sharing one transmit and one receive CQ (contexts tell them
 * apart). It sends their names; the server inserts all N with one fi_av_insert call (the
 * AV was opened with count 16, so this also checks that count is only a hint, fi_av(3))
 * and checks it gets N distinct fi_addr_t. Each client endpoint r posts a receive for
 * its reply, then sends one tagged message (tag base + r, remote CQ data r, 64 + 97 r
 * bytes, or 256 KiB + r for every 16th rank); all N sends are posted before any is
 * waited for. The server has posted one receive per rank (FI_ADDR_UNSPEC, tag base + r);
 * for each message it checks len, tag, data, every byte and, with FI_SOURCE, that the
 * source is rank r's fi_addr_t; then it replies to that source (with FI_SOURCE: to the
 * address the entry reported) with tag reply + r and a rank-specific pattern. Each
 * client endpoint checks its reply's len, tag, data, bytes and source.
 */
#include "common/ft_rdm.h"

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

constexpr uint64_t req_tag = 0x5e9d000000000000ull;
constexpr uint64_t reply_tag = 0x9e9b000000000000ull;

size_t req_len(int r) { return r % 16 == 0 ? (256u << 10) + size_t(r) : 64 + 97 * size_t(r); }
size_t reply_len(int r) { return r % 16 == 8 ? (200u << 10) + size_t(r) : 1 + 13 * size_t(r); }
constexpr size_t stride = 512u << 10;

} // namespace

int main(int argc, char **argv)
{
	int n = int(take_number(argc, argv, "-N", 64));
	parse_options(argc, argv, "one server endpoint, -N client endpoints (default 64)");
	if (n < 1 || n > 4096) {
		fprintf(stderr, "-N %d: 1 .. 4096\n", n);
		return 2;
	}
	Fabric fab(FI_TAGGED | FI_SEND | FI_RECV, FI_SOURCE);
	const bool src = fab.has(FI_SOURCE);
	const bool cq_data = fab.cq_data_size() > 0;
	if (!src)
		skip_part("FI_SOURCE is not advertised: sources are not checked, replies go to the "
			  "inserted addresses");
	if (!cq_data)
		skip_part("cq_data_size is 0: no remote CQ data");
	auto data_of = [&](int r, bool reply) {
		return fab.cq_data((reply ? 0x7700000000000000ull : 0x5500000000000000ull) + uint64_t(r));
	};
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */

	if (opts.client) {
		Cq shared_tx(fab, cq_spec(fab), "shared tx cq"), shared_rx(fab, cq_spec(fab), "shared rx cq");
		std::vector<std::unique_ptr<Endpoint>> eps;
		for (int r = 0; r < n; r++) {
			EpSpec spec = ep_spec(fab);
			if (r >= n / 2) {
				spec.shared_tx = &shared_tx;
				spec.shared_rx = &shared_rx;
			}
			eps.push_back(std::make_unique<Endpoint>(fab, spec));
		}
		ctl.put(uint32_t(n));
		for (auto &e : eps)
			ctl.send_blob(e->name());
		fi_addr_t server = fab.insert(ctl.recv_blob());
		Buffer sbuf(fab, size_t(n) * stride), rbuf(fab, size_t(n) * stride);
		std::vector<fi_context2> sctx(static_cast<size_t>(n)), rctx(static_cast<size_t>(n));
		ctl.sync("posted");
		for (int r = 0; r < n; r++) {
			uint8_t *rp = rbuf.data() + size_t(r) * stride;
			memset(rp, canary, reply_len(r) + 64);
			FT_POST(fi_trecv(*eps[size_t(r)], rp, reply_len(r) + 64, rbuf.desc(), server,
					  reply_tag + uint64_t(r), 0, &rctx[size_t(r)]));
			uint8_t *sp = sbuf.data() + size_t(r) * stride;
			fill_pattern(sp, req_len(r), uint32_t(r));
			if (cq_data)
				FT_POST(fi_tsenddata(*eps[size_t(r)], sp, req_len(r), sbuf.desc(),
						      data_of(r, false), server, req_tag + uint64_t(r),
						      &sctx[size_t(r)]));
			else
				FT_POST(fi_tsend(*eps[size_t(r)], sp, req_len(r), sbuf.desc(), server,
						  req_tag + uint64_t(r), &sctx[size_t(r)]));
		}
		for (int r = 0; r < n; r++) {
			std::string what = "rank " + std::to_string(r);
			eps[size_t(r)]->tx().wait(&sctx[size_t(r)], what + ": send");
			Entry e = eps[size_t(r)]->rx().wait(&rctx[size_t(r)], what + ": reply");
			FT_CHECK(e.len == reply_len(r) && e.tag == reply_tag + uint64_t(r),
				 "%s: reply entry %s, expected len %zu tag 0x%llx", what.c_str(),
				 e.describe().c_str(), reply_len(r),
				 (unsigned long long)(reply_tag + uint64_t(r)));
			expect_flags(e, FI_RECV | FI_TAGGED | (cq_data ? FI_REMOTE_CQ_DATA : 0), FI_SEND,
				     what + ": reply");
			if (cq_data)
				FT_CHECK(e.data == data_of(r, true), "%s: reply data 0x%llx", what.c_str(),
					 (unsigned long long)e.data);
			if (src)
				FT_CHECK(e.src == server, "%s: reply from %llu, the server is %llu",
					 what.c_str(), (unsigned long long)e.src,
					 (unsigned long long)server);
			uint8_t *rp = rbuf.data() + size_t(r) * stride;
			FT_EXPECT_PATTERN(rp, reply_len(r), uint32_t(1000 + r), 0, (what + ": reply").c_str());
			FT_EXPECT_BYTES(rp + reply_len(r), 64, canary, (what + ": after the reply").c_str());
		}
		ctl.sync("end");
		note("%d client endpoints (%d with their own CQs, %d sharing one pair): requests "
		     "sent, replies verified",
		     n, n / 2, n - n / 2);
		return 0;
	}

	/* server */
	Endpoint ep(fab, ep_spec(fab));
	uint32_t nc = ctl.get<uint32_t>();
	FT_CHECK(int(nc) == n, "the client has %u endpoints, the server expects -N %d", nc, n);
	std::vector<std::vector<uint8_t>> names;
	bool same_len = true;
	for (int r = 0; r < n; r++) {
		names.push_back(ctl.recv_blob());
		same_len = same_len && names.back().size() == names.front().size();
	}
	ctl.send_blob(ep.name());
	std::vector<fi_addr_t> addr(size_t(n), FI_ADDR_NOTAVAIL);
	if (same_len) {
		/* One call for all: an array of fixed-size addresses. */
		std::vector<uint8_t> all;
		for (auto &nm : names)
			all.insert(all.end(), nm.begin(), nm.end());
		int inserted = int(FT_CALL(
			fi_av_insert(fab.av(), all.data(), size_t(n), addr.data(), 0, nullptr)));
		FT_CHECK(inserted == n, "fi_av_insert of %d addresses inserted %d", n, inserted);
	} else {
		/* Names of varying length (string formats such as FI_ADDR_STR): one by one. */
		note("the endpoint names differ in length (address format %u): inserted one by one",
		     fab.info()->addr_format);
		for (int r = 0; r < n; r++)
			addr[size_t(r)] = fab.insert(names[size_t(r)]);
	}
	std::set<fi_addr_t> distinct(addr.begin(), addr.end());
	FT_CHECK(!distinct.count(FI_ADDR_NOTAVAIL) && distinct.size() == size_t(n),
		 "fi_av_insert gave %zu distinct fi_addr_t for %d addresses (or FI_ADDR_NOTAVAIL)",
		 distinct.size(), n);

	Buffer rbuf(fab, size_t(n) * stride), sbuf(fab, size_t(n) * stride);
	std::vector<fi_context2> rctx(static_cast<size_t>(n)), sctx(static_cast<size_t>(n));
	for (int r = 0; r < n; r++) {
		uint8_t *rp = rbuf.data() + size_t(r) * stride;
		memset(rp, canary, req_len(r) + 64);
		FT_POST(fi_trecv(ep, rp, req_len(r) + 64, rbuf.desc(), FI_ADDR_UNSPEC,
				  req_tag + uint64_t(r), 0, &rctx[size_t(r)]));
	}
	ctl.sync("posted");
	/* Serve in completion order. */
	int served = 0;
	std::vector<bool> seen(static_cast<size_t>(n));
	while (served < n) {
		Entry e = ep.rx().next("requests");
		FT_CHECK(!e.error, "request: %s", e.describe().c_str());
		int r = -1;
		for (int k = 0; k < n; k++)
			if (e.ctx == &rctx[size_t(k)])
				r = k;
		FT_CHECK(r >= 0 && !seen[size_t(r)], "request entry with an unknown or repeated context: %s",
			 e.describe().c_str());
		seen[size_t(r)] = true;
		std::string what = "request of rank " + std::to_string(r);
		FT_CHECK(e.len == req_len(r) && e.tag == req_tag + uint64_t(r),
			 "%s: entry %s, expected len %zu", what.c_str(), e.describe().c_str(), req_len(r));
		expect_flags(e, FI_RECV | FI_TAGGED | (cq_data ? FI_REMOTE_CQ_DATA : 0), FI_SEND, what);
		if (cq_data)
			FT_CHECK(e.data == data_of(r, false), "%s: data 0x%llx", what.c_str(),
				 (unsigned long long)e.data);
		fi_addr_t to = addr[size_t(r)];
		if (src) {
			FT_CHECK(e.src == addr[size_t(r)], "%s: source %llu, rank %d was inserted as %llu",
				 what.c_str(), (unsigned long long)e.src, r,
				 (unsigned long long)addr[size_t(r)]);
			to = e.src;
		}
		uint8_t *rp = rbuf.data() + size_t(r) * stride;
		FT_EXPECT_PATTERN(rp, req_len(r), uint32_t(r), 0, what.c_str());
		FT_EXPECT_BYTES(rp + req_len(r), 64, canary, (what + ": after the data").c_str());
		uint8_t *sp = sbuf.data() + size_t(r) * stride;
		fill_pattern(sp, reply_len(r), uint32_t(1000 + r));
		if (cq_data)
			FT_POST(fi_tsenddata(ep, sp, reply_len(r), sbuf.desc(), data_of(r, true), to,
					      reply_tag + uint64_t(r), &sctx[size_t(r)]));
		else
			FT_POST(fi_tsend(ep, sp, reply_len(r), sbuf.desc(), to, reply_tag + uint64_t(r),
					  &sctx[size_t(r)]));
		served++;
	}
	for (int r = 0; r < n; r++)
		ep.tx().wait(&sctx[size_t(r)], "reply to rank " + std::to_string(r));
	ctl.sync("end");
	note("%d peers: %d addresses inserted%s, requests verified%s, replies sent", n, n,
	     same_len ? " with one fi_av_insert" : "", src ? " with their sources" : "");
	return 0;
}
