/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_unknown_sender: messages from a sender that is not (yet) in the receiver's AV, what
 * a server that learns its clients' addresses from their first message does.
 *
 * The server gets the client's name over the control channel but does not insert it.
 *  1. While the server reads no CQ (on efa), the client sends K tagged messages (0 B, 8 B, 4000 B
 *     and 20000 B: one and several packets). Then the server receives them (FI_ADDR_UNSPEC)
 *     and the client sends K more, which reach a receiver that has met it by now. All 2K
 *     arrive in order, with their bytes, and with FI_SOURCE as FI_ADDR_NOTAVAIL (fi_cq(3):
 *     the source is not in the AV).
 *     One more message (tag "early") arrives before the insert and is left unexpected
 *     (a zero-byte marker sent after it, received first, proves it was taken in, with
 *     FI_ORDER_SAS).
 *  2. The server inserts the client's address and replies to it. A receive directed at
 *     the client's new fi_addr_t takes the early message. The client sends K more:
 *     they arrive in order with their bytes, now with the inserted fi_addr_t as source;
 *     a receive directed at that fi_addr_t matches.
 * Every message of one sender must reach the same per-peer state (message ids, reorder
 * buffer) whether it came before the receiver had an address handle for the sender,
 * after, or after the sender's address was inserted.
 */
#include "common/ft_rdm.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

constexpr uint64_t T = 0x0a5e000000000000ull;
constexpr uint64_t reply_tag = 0x0a5f000000000000ull;
constexpr uint64_t directed_tag = 0x0a60000000000000ull;
constexpr uint64_t early_tag = 0x0a61000000000000ull;
constexpr uint64_t marker_tag = 0x0a62000000000000ull;
constexpr int K = 24;
constexpr size_t kMax = 20000;

size_t len_of(int i)
{
	static const size_t lens[] = {0, 8, 4000, kMax};
	return lens[size_t(i) % 4];
}

uint8_t *slot(Buffer &b, int i) { return static_cast<uint8_t *>(b.data()) + size_t(i) * kMax; }

/* Posts the sends, reaches `step` with the server, then waits for their completions (a
 * provider with a rendezvous protocol completes a large send only once it is received). */
void send_range(Endpoint &ep, Buffer &buf, fi_addr_t to, int from, int count, Ctl &ctl, const char *step)
{
	std::vector<fi_context2> ctx(static_cast<size_t>(count));
	for (int i = 0; i < count; i++) {
		const int m = from + i;
		fill_pattern(slot(buf, i), len_of(m), uint32_t(m));
		FT_POST(fi_tsend(ep, slot(buf, i), len_of(m), buf.desc(), to, T + uint64_t(m), &ctx[size_t(i)]));
	}
	ctl.sync(step);
	for (int i = 0; i < count; i++)
		ep.tx().wait(&ctx[size_t(i)], "send " + std::to_string(from + i));
}

void recv_range(Fabric &fab, Endpoint &ep, Buffer &buf, int from, int count, fi_addr_t src, fi_addr_t expect_src)
{
	std::vector<fi_context2> ctx(static_cast<size_t>(count));
	for (int i = 0; i < count; i++) {
		memset(slot(buf, i), canary, kMax);
		FT_POST(fi_trecv(ep, slot(buf, i), kMax, buf.desc(), src, T + uint64_t(from + i), 0, &ctx[size_t(i)]));
	}
	for (int i = 0; i < count; i++) {
		const int m = from + i;
		const std::string what = "message " + std::to_string(m);
		Entry e = ep.rx().wait(&ctx[size_t(i)], what);
		FT_CHECK(e.len == len_of(m) && e.tag == T + uint64_t(m), "%s: entry %s", what.c_str(),
			 e.describe().c_str());
		FT_EXPECT_PATTERN(slot(buf, i), len_of(m), uint32_t(m), 0, what.c_str());
		FT_EXPECT_BYTES(slot(buf, i) + len_of(m), kMax - len_of(m), canary, (what + ": after the data").c_str());
		if (fab.has(FI_SOURCE))
			deviation(fab, e.src == expect_src, Loc::current(), "%s: source %llu, expected %llu", what.c_str(),
				  (unsigned long long)e.src, (unsigned long long)expect_src);
	}
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "messages from a sender not in the AV, before and after it is inserted");
	Fabric fab(FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV, FI_SOURCE);
	request_order(fab, FI_ORDER_SAS);
	const bool sas = has_order(fab, FI_ORDER_SAS);
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */
	Endpoint ep(fab, ep_spec(fab));
	Buffer buf(fab, size_t(K) * kMax);
	if (!fab.has(FI_SOURCE))
		skip_part("FI_SOURCE is not advertised: sources are not checked");

	/* The names go one way each; only the client inserts. */
	ctl.send_blob(ep.name());
	const std::vector<uint8_t> peer_name = ctl.recv_blob();

	if (opts.client) {
		const fi_addr_t server = fab.insert(peer_name);
		Buffer rbuf(fab, 4096);
		fi_context2 rctx{};
		FT_POST(fi_trecv(ep, rbuf.data(), 4096, rbuf.desc(), FI_ADDR_UNSPEC, reply_tag, 0, &rctx));
		send_range(ep, buf, server, 0, K, ctl, "first half sent");
		ctl.sync("first half received");
		send_range(ep, buf, server, K, K, ctl, "second half sent");
		if (sas) {
			fi_context2 ectx{}, mctx{};
			fill_pattern(slot(buf, 0), 500, 0xea);
			FT_POST(fi_tsend(ep, slot(buf, 0), 500, buf.desc(), server, early_tag, &ectx));
			FT_POST(fi_tsend(ep, nullptr, 0, nullptr, server, marker_tag, &mctx));
			ep.tx().wait(&ectx, "the early message");
			ep.tx().wait(&mctx, "the marker");
		}
		ctl.sync("early sent");

		Entry r = ep.rx().wait(&rctx, "the server's reply");
		FT_CHECK(r.len == 100 && r.tag == reply_tag, "the reply: %s", r.describe().c_str());
		FT_EXPECT_PATTERN(rbuf.data(), 100, 0x4e91, 0, "the reply");
		ctl.sync("replied");
		send_range(ep, buf, server, 2 * K, K, ctl, "third part sent");
		fill_pattern(buf.data(), 300, 0xd1);
		fi_context2 dctx{};
		FT_POST(fi_tsend(ep, buf.data(), 300, buf.desc(), server, directed_tag, &dctx));
		ep.tx().wait(&dctx, "the send to the directed receive");
		ctl.sync("end");
		note("%d messages before and %d after the server inserted this address: delivered", 2 * K, K + 1);
		return 0;
	}

	/* server: on efa, whose device takes packets without the application, nothing is
	 * read while the first half comes in (a provider with manual progress needs it, and
	 * so does efa when shm may carry it: libfabric 1.17's shm takes a sender's first
	 * message only once the receiver's progress has read its connection request) */
	const char *shm = std::getenv("FI_EFA_ENABLE_SHM_TRANSFER");
	ctl_progress = !fab.is_efa() || !shm || std::strcmp(shm, "0") != 0;
	ctl.sync("first half sent");
	ctl_progress = true;
	recv_range(fab, ep, buf, 0, K, FI_ADDR_UNSPEC, FI_ADDR_NOTAVAIL);
	ctl.sync("first half received");
	ctl.sync("second half sent");
	recv_range(fab, ep, buf, K, K, FI_ADDR_UNSPEC, FI_ADDR_NOTAVAIL);
	ctl.sync("early sent");
	if (sas) {
		fi_context2 mctx{};
		FT_POST(fi_trecv(ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, marker_tag, 0, &mctx));
		ep.rx().wait(&mctx, "the marker");
	}

	const fi_addr_t client = fab.insert(peer_name);
	if (sas) {
		/* the early message, unexpected since before the insert, to a receive directed at
		 * the new fi_addr_t: the first thing done with it */
		fi_context2 ectx{};
		memset(buf.data(), canary, 512);
		FT_POST(fi_trecv(ep, buf.data(), 512, buf.desc(), client, early_tag, 0, &ectx));
		Entry e = ep.rx().wait(&ectx, "the early message (directed receive after the insert)");
		FT_CHECK(e.len == 500 && e.tag == early_tag, "the early message: %s", e.describe().c_str());
		FT_EXPECT_PATTERN(buf.data(), 500, 0xea, 0, "the early message");
	} else {
		skip_part("FI_ORDER_SAS not available: the early unexpected message to a directed receive");
	}

	fill_pattern(buf.data(), 100, 0x4e91);
	fi_context2 sctx{};
	FT_POST(fi_tsend(ep, buf.data(), 100, buf.desc(), client, reply_tag, &sctx));
	ep.tx().wait(&sctx, "the reply");
	ctl.sync("replied");
	ctl.sync("third part sent");
	recv_range(fab, ep, buf, 2 * K, K, FI_ADDR_UNSPEC, client);

	fi_context2 dctx{};
	memset(buf.data(), canary, 512);
	FT_POST(fi_trecv(ep, buf.data(), 512, buf.desc(), client, directed_tag, 0, &dctx));
	Entry d = ep.rx().wait(&dctx, "the directed receive");
	FT_CHECK(d.len == 300 && d.tag == directed_tag, "the directed receive: %s", d.describe().c_str());
	FT_EXPECT_PATTERN(buf.data(), 300, 0xd1, 0, "the directed receive");
	ctl.sync("end");
	note("%d messages from a sender not in the AV (source FI_ADDR_NOTAVAIL), %d after inserting it "
	     "(source its fi_addr_t), one to a directed receive: verified",
	     2 * K, K);
	return 0;
}
