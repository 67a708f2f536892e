/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_peek: FI_PEEK, FI_CLAIM, FI_DISCARD (fi_tagged(3), "FLAGS") and fi_cancel
 * (fi_endpoint(3), "fi_cancel") on tagged receives. The client sends, the server peeks.
 *
 * Before each step the client sends the step's messages and then (with FI_ORDER_SAS) a
 * marker message; the server receives the marker first, so the messages are known to be
 * waiting as unexpected and a peek must find them at once. (Without FI_ORDER_SAS the
 * server peeks until found, within the bound.)
 *
 *   miss      a peek for a tag nobody sent completes in error with FI_ENOMSG, op_context
 *             the peek's.
 *   peek      a peek finds the message: len, tag, flags FI_RECV|FI_TAGGED (with
 *             FI_REMOTE_CQ_DATA and the data), source; buf NULL or the peek's buffer
 *             holding the message's first bytes (fi_tagged(3)); a second peek finds it
 *             again (not consumed); a receive then gets it; a third peek misses.
 *   claim     FI_PEEK|FI_CLAIM takes the first of two messages with one tag: a plain
 *             receive posted next gets the second, and fi_trecvmsg(FI_CLAIM) with the
 *             same fi_context gets the claimed one (op_context that context, len, data),
 *             for a 5000 B and a 1 MiB message.
 *   discard   FI_PEEK|FI_DISCARD drops the first of two: a receive gets the second, and a
 *             peek then misses; also for a 1 MiB message, whose send must still complete.
 *   claim+discard  FI_PEEK|FI_CLAIM, then fi_trecvmsg(FI_CLAIM|FI_DISCARD) with the same
 *             context completes without writing its buffer; a receive gets the second.
 *   cancel    fi_cancel of a posted tagged receive (and, with FI_MSG, an untagged one)
 *             returns 0 and the receive completes in error with FI_ECANCELED and its
 *             op_context; a message sent afterwards is not taken by it (it is found by a
 *             peek, then received).
 */
#include "common/ft_rdm.h"

#include <cstring>
#include <string>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

constexpr uint64_t marker = 0x4d41524b00000000ull;
constexpr uint64_t P = 0x9ee4000000000000ull; /* step tags: P + n */

struct Server {
	Fabric &fab;
	Ctl &ctl;
	Endpoint &ep;
	fi_addr_t peer;
	Buffer buf;
	bool sas, src;

	Server(Fabric &f, Ctl &c, Endpoint &e, fi_addr_t p)
		: fab(f), ctl(c), ep(e), peer(p), buf(f, (3u << 20)),
		  sas(has_order(f, FI_ORDER_SAS)), src(f.has(FI_SOURCE))
	{
	}

	/* The step's messages are waiting (see the top). */
	void arrived(const std::string &step, uint64_t mtag)
	{
		ctl.await("sent " + step);
		if (!sas)
			return;
		fi_context2 ctx{};
		FT_POST(fi_trecv(ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, mtag, 0, &ctx));
		Entry e = ep.rx().wait(&ctx, "the marker of " + step);
		FT_CHECK(e.len == 0 && e.tag == mtag, "%s: marker entry %s", step.c_str(),
			 e.describe().c_str());
	}

	/* One fi_trecvmsg with `flags`; its completion (successful or not). */
	Entry post_msg(fi_context2 *ctx, uint64_t tag, uint8_t *p, size_t len, uint64_t flags,
		       const std::string &what)
	{
		iovec iov{p, len};
		void *desc = buf.desc();
		fi_msg_tagged m{p ? &iov : nullptr, p ? &desc : nullptr, size_t(p ? 1 : 0),
				FI_ADDR_UNSPEC, tag, 0, ctx, 0};
		FT_POST(fi_trecvmsg(ep, &m, flags));
		return ep.rx().wait_any(ctx, what);
	}

	void expect_miss(uint64_t tag, const std::string &what)
	{
		fi_context2 ctx{};
		Entry e = post_msg(&ctx, tag, buf.data(), 64, FI_PEEK, what);
		FT_CHECK(e.error && e.err == FI_ENOMSG,
			 "%s: a peek for a message that is not there gave %s, expected an error "
			 "entry with FI_ENOMSG",
			 what.c_str(), e.describe().c_str());
	}

	/* A successful peek (or peek+claim/discard) of a message of len bytes. */
	Entry expect_found(fi_context2 *ctx, uint64_t tag, size_t len, uint32_t seed, bool data,
			   uint64_t flags, const std::string &what)
	{
		Deadline deadline;
		const size_t peek_len = 200;
		for (;;) {
			memset(buf.data(), canary, peek_len + 64);
			Entry e = post_msg(ctx, tag, buf.data(), peek_len, FI_PEEK | flags, what);
			if (e.error && e.err == FI_ENOMSG && !sas && !deadline.expired())
				continue; /* not there yet: only without the marker */
			FT_CHECK(!e.error, "%s: %s", what.c_str(), e.describe().c_str());
			/* fi_tagged(3), FI_PEEK: a successful peek's entry gives "the message
			 * length"; with FI_DISCARD as well (it is still a peek that found it). */
			if (flags & FI_DISCARD)
				deviation(fab, e.len == len, Loc::current(),
					  "%s: the FI_PEEK|FI_DISCARD entry reports len %zu, the "
					  "message has %zu",
					  what.c_str(), e.len, len);
			else
				FT_CHECK(e.len == len, "%s: peek reports len %zu, the message has %zu",
					 what.c_str(), e.len, len);
			FT_CHECK(e.tag == tag, "%s: peek reports tag 0x%llx, expected 0x%llx",
				 what.c_str(), (unsigned long long)e.tag, (unsigned long long)tag);
			expect_flags(e, FI_RECV | FI_TAGGED, FI_SEND | (data ? 0 : FI_REMOTE_CQ_DATA),
				     what);
			/* fi_tagged(3), FI_PEEK: the entry gives the message's "completion
			 * flags, available CQ data". */
			if (data) {
				deviation(fab, e.flags & FI_REMOTE_CQ_DATA, Loc::current(),
					  "%s: the peek entry lacks FI_REMOTE_CQ_DATA (flags %s) for a "
					  "message with remote CQ data",
					  what.c_str(), flags_str(e.flags).c_str());
				FT_CHECK(e.data == fab.cq_data(seed), "%s: data 0x%llx, expected 0x%llx",
					 what.c_str(), (unsigned long long)e.data,
					 (unsigned long long)fab.cq_data(seed));
			}
			if (src)
				FT_CHECK(e.src == peer, "%s: source %llu, expected %llu", what.c_str(),
					 (unsigned long long)e.src, (unsigned long long)peer);
			/* fi_tagged(3): buf is the first input buffer when data was copied,
			 * else NULL. */
			size_t n = std::min(len, peek_len);
			if (e.buf) {
				FT_CHECK(e.buf == buf.data(),
					 "%s: peek entry buf %p is neither NULL nor the peek's buffer %p",
					 what.c_str(), e.buf, (void *)buf.data());
				FT_EXPECT_PATTERN(buf.data(), n, seed, 0, (what + ": peeked data").c_str());
				FT_EXPECT_BYTES(buf.data() + n, peek_len - n + 64, canary,
						(what + ": after the peeked data").c_str());
			} else if (!(flags & FI_DISCARD)) {
				/* No data returned: the buffer must be untouched... unless the
				 * provider wrote it and reported NULL, which fi_tagged(3) allows
				 * ("may return NULL even if"); only the bytes past it are checked. */
				FT_EXPECT_BYTES(buf.data() + peek_len, 64, canary,
						(what + ": after the peek buffer").c_str());
			}
			return e;
		}
	}

	/* A plain receive of a len-byte message. */
	void receive(uint64_t tag, size_t len, uint32_t seed, bool data, const std::string &what,
		     fi_context2 *ctx_in = nullptr, uint64_t flags = 0)
	{
		fi_context2 own{};
		fi_context2 *ctx = ctx_in ? ctx_in : &own;
		memset(buf.data(), canary, len + 128);
		Entry e = post_msg(ctx, tag, buf.data(), len + 64, flags, what);
		FT_CHECK(!e.error, "%s: %s", what.c_str(), e.describe().c_str());
		FT_CHECK(e.ctx == ctx, "%s: op_context %p, expected %p", what.c_str(), e.ctx,
			 (void *)ctx);
		FT_CHECK(e.len == len, "%s: len %zu, expected %zu (another message?)", what.c_str(),
			 e.len, len);
		FT_CHECK(e.tag == tag, "%s: tag 0x%llx", what.c_str(), (unsigned long long)e.tag);
		expect_flags(e, FI_RECV | FI_TAGGED | (data ? FI_REMOTE_CQ_DATA : 0), FI_SEND, what);
		if (data)
			FT_CHECK(e.data == fab.cq_data(seed), "%s: data 0x%llx", what.c_str(),
				 (unsigned long long)e.data);
		if (src)
			FT_CHECK(e.src == peer, "%s: source %llu", what.c_str(),
				 (unsigned long long)e.src);
		FT_EXPECT_PATTERN(buf.data(), len, seed, 0, what.c_str());
		FT_EXPECT_BYTES(buf.data() + len, 64, canary, (what + ": after the data").c_str());
	}
};

/* The client's messages of each step: tag, len, seed, with data. */
struct Send {
	uint64_t tag;
	size_t len;
	uint32_t seed;
	bool data;
};

void client_step(Ctl &ctl, Fabric &fab, Endpoint &ep, fi_addr_t peer, Buffer &sbuf,
		 const std::string &step, uint64_t mtag, const std::vector<Send> &sends)
{
	std::vector<fi_context2> ctx(sends.size());
	size_t off = 0;
	for (size_t i = 0; i < sends.size(); i++) {
		const Send &s = sends[i];
		fill_pattern(sbuf.data() + off, s.len, s.seed);
		if (s.data)
			FT_POST(fi_tsenddata(ep, sbuf.data() + off, s.len, sbuf.desc(),
					      fab.cq_data(s.seed), peer, s.tag, &ctx[i]));
		else
			FT_POST(fi_tsend(ep, sbuf.data() + off, s.len, sbuf.desc(), peer, s.tag,
					  &ctx[i]));
		off += s.len;
	}
	fi_context2 mctx{};
	bool sas = has_order(fab, FI_ORDER_SAS);
	if (sas)
		FT_POST(fi_tsend(ep, nullptr, 0, nullptr, peer, mtag, &mctx));
	ctl.notify("sent " + step);
	if (sas)
		ep.tx().wait(&mctx, step + ": the marker");
	for (size_t i = 0; i < sends.size(); i++) {
		std::string what = step + ": send " + std::to_string(i);
		/* A discarded message's send must complete; that it completes successfully
		 * is not written anywhere, so an error entry is accepted (and shown). */
		bool discarded = i == 0 && step.starts_with("discard");
		Entry e = discarded ? ep.tx().wait_any(&ctx[i], what) : ep.tx().wait(&ctx[i], what);
		if (e.error)
			note("%s (discarded by the server) completed with %s", what.c_str(),
			     e.describe().c_str());
		else
			expect_flags(e, FI_SEND | FI_TAGGED, FI_RECV, what);
	}
	ctl.sync("done " + step);
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "FI_PEEK, FI_CLAIM, FI_DISCARD and fi_cancel on tagged receives");
	Fabric fab(FI_TAGGED | FI_SEND | FI_RECV, FI_MSG | FI_SOURCE);
	request_order(fab, FI_ORDER_SAS);
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */
	Endpoint ep(fab, ep_spec(fab));
	fi_addr_t peer = ctl.exchange_names(fab, ep);
	const bool data = fab.cq_data_size() > 0;
	const size_t big = std::min<size_t>(fab.max_msg_size(), (1u << 20) + 7);
	if (!has_order(fab, FI_ORDER_SAS))
		skip_part("FI_ORDER_SAS is not advertised: peeks are repeated until they find the "
			  "message (no marker)");
	if (!fab.has(FI_SOURCE))
		skip_part("FI_SOURCE is not advertised: source addresses are not checked");

	/* The steps: name, the client's messages. */
	struct Step {
		std::string name;
		std::vector<Send> sends;
	};
	std::vector<Step> steps = {
		{"peek", {{P + 1, 1000, 101, data}}},
		{"claim", {{P + 2, 5000, 102, data}, {P + 2, 300, 103, false}}},
		{"claim large", {{P + 3, big, 104, false}, {P + 3, 10, 105, false}}},
		{"discard", {{P + 4, 700, 106, false}, {P + 4, 800, 107, data}}},
		{"discard large", {{P + 5, big, 108, false}, {P + 5, 20, 109, false}}},
		{"claim+discard", {{P + 6, 900, 110, false}, {P + 6, 100, 111, false}}},
		{"after cancel", {{P + 7, 400, 112, false}}},
	};
	const bool discard_large = !known_broken(fab, "FI_PEEK|FI_DISCARD of a 1 MiB message");
	if (!discard_large)
		std::erase_if(steps, [](const Step &st) { return st.name == "discard large"; });

	if (opts.client) {
		Buffer sbuf(fab, 2 * big + 65536);
		ctl.sync("miss");
		for (size_t i = 0; i < steps.size(); i++) {
			if (steps[i].name == "after cancel")
				ctl.sync("cancelled");
			client_step(ctl, fab, ep, peer, sbuf, steps[i].name, marker | (i + 1),
				    steps[i].sends);
		}
		ctl.sync("end");
		return 0;
	}

	Server s(fab, ctl, ep, peer);
	auto mtag = [&](const char *name) {
		for (size_t i = 0; i < steps.size(); i++)
			if (steps[i].name == name)
				return marker | (i + 1);
		FT_FAIL("no step %s", name);
	};

	/* miss */
	s.expect_miss(P + 0, "FI_PEEK for a tag never sent");
	ctl.sync("miss");
	note("FI_PEEK miss: FI_ENOMSG");

	/* peek */
	{
		s.arrived("peek", mtag("peek"));
		fi_context2 c1{}, c2{};
		s.expect_found(&c1, P + 1, 1000, 101, data, 0, "FI_PEEK of a 1000 B message");
		s.expect_found(&c2, P + 1, 1000, 101, data, 0, "a second FI_PEEK (not consumed)");
		s.receive(P + 1, 1000, 101, data, "the receive after two peeks");
		s.expect_miss(P + 1, "FI_PEEK after the message was received");
		ctl.sync("done peek");
		note("FI_PEEK: found twice, then received, then missed");
	}

	/* claim, for a small and a large message */
	for (const char *name : {"claim", "claim large"}) {
		std::string st = name;
		bool large = st == "claim large";
		uint64_t tag = large ? P + 3 : P + 2;
		size_t len1 = large ? big : 5000, len2 = large ? 10 : 300;
		uint32_t seed1 = large ? 104 : 102, seed2 = large ? 105 : 103;
		bool d1 = large ? false : data;
		s.arrived(st, mtag(name));
		fi_context2 claim{};
		s.expect_found(&claim, tag, len1, seed1, d1, FI_CLAIM,
			       st + ": FI_PEEK|FI_CLAIM of the first message");
		s.receive(tag, len2, seed2, false,
			  st + ": a plain receive gets the second message (the first is claimed)");
		s.receive(tag, len1, seed1, d1, st + ": fi_trecvmsg(FI_CLAIM) with the claim's context",
			  &claim, FI_CLAIM);
		s.expect_miss(tag, st + ": FI_PEEK after both were received");
		ctl.sync("done " + st);
		note("FI_PEEK|FI_CLAIM then FI_CLAIM (%s): verified", size_str(len1).c_str());
	}

	/* discard, small and large */
	for (const char *name : {"discard", "discard large"}) {
		std::string st = name;
		if (st == "discard large" && !discard_large)
			continue;
		bool large = st == "discard large";
		uint64_t tag = large ? P + 5 : P + 4;
		size_t len1 = large ? big : 700, len2 = large ? 20 : 800;
		uint32_t seed1 = large ? 108 : 106, seed2 = large ? 109 : 107;
		bool d2 = large ? false : data;
		s.arrived(st, mtag(name));
		fi_context2 dctx{};
		s.expect_found(&dctx, tag, len1, seed1, false, FI_DISCARD,
			       st + ": FI_PEEK|FI_DISCARD of the first message");
		s.receive(tag, len2, seed2, d2, st + ": a receive gets the second message");
		s.expect_miss(tag, st + ": FI_PEEK after the discard and the receive");
		ctl.sync("done " + st);
		note("FI_PEEK|FI_DISCARD (%s): verified; the sender's send completed",
		     size_str(len1).c_str());
	}

	/* claim + discard */
	{
		s.arrived("claim+discard", mtag("claim+discard"));
		fi_context2 claim{};
		s.expect_found(&claim, P + 6, 900, 110, false, FI_CLAIM,
			       "FI_PEEK|FI_CLAIM before FI_CLAIM|FI_DISCARD");
		memset(s.buf.data(), canary, 2048);
		Entry e = s.post_msg(&claim, P + 6, s.buf.data(), 1024, FI_CLAIM | FI_DISCARD,
				     "fi_trecvmsg(FI_CLAIM|FI_DISCARD)");
		FT_CHECK(!e.error, "fi_trecvmsg(FI_CLAIM|FI_DISCARD): %s", e.describe().c_str());
		FT_EXPECT_BYTES(s.buf.data(), 2048, canary,
				"the buffer of fi_trecvmsg(FI_CLAIM|FI_DISCARD) (ignored)");
		s.receive(P + 6, 100, 111, false, "the receive after FI_CLAIM|FI_DISCARD");
		s.expect_miss(P + 6, "FI_PEEK after FI_CLAIM|FI_DISCARD and the receive");
		ctl.sync("done claim+discard");
		note("FI_PEEK|FI_CLAIM then FI_CLAIM|FI_DISCARD: verified");
	}

	/* cancel */
	{
		fi_context2 t{}, u{};
		FT_POST(fi_trecv(ep, s.buf.data(), 4096, s.buf.desc(), FI_ADDR_UNSPEC, P + 7, 0, &t));
		FT_EXPECT_RC(fi_cancel(&ep.ep()->fid, &t), 0);
		Entry e = ep.rx().wait_error(&t, "the cancelled tagged receive");
		FT_CHECK(e.err == FI_ECANCELED, "cancelled receive: err %d (%s), expected FI_ECANCELED",
			 e.err, fi_strerror(e.err));
		if (fab.has(FI_MSG)) {
			FT_POST(fi_recv(ep, s.buf.data(), 4096, s.buf.desc(), FI_ADDR_UNSPEC, &u));
			FT_EXPECT_RC(fi_cancel(&ep.ep()->fid, &u), 0);
			Entry f = ep.rx().wait_error(&u, "the cancelled untagged receive");
			FT_CHECK(f.err == FI_ECANCELED,
				 "cancelled untagged receive: err %d (%s), expected FI_ECANCELED",
				 f.err, fi_strerror(f.err));
		} else {
			skip_part("FI_MSG is not advertised: fi_cancel of an untagged receive");
		}
		ep.rx().expect_empty("nothing more after the cancellations");
		ctl.sync("cancelled");
		s.arrived("after cancel", mtag("after cancel"));
		fi_context2 pk{};
		s.expect_found(&pk, P + 7, 400, 112, false, 0,
			       "FI_PEEK finds the message sent after the cancel (the cancelled "
			       "receive did not take it)");
		s.receive(P + 7, 400, 112, false, "the receive after the cancel");
		ctl.sync("done after cancel");
		note("fi_cancel: FI_ECANCELED with the op_context; the cancelled receive took "
		     "nothing");
	}
	ctl.sync("end");
	return 0;
}
