/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_dgram: FI_EP_DGRAM endpoints (upstream's dgram ping-pong and AV insert/transfer
 * tests, in the style of these fabtests), with the message prefix of FI_MSG_PREFIX when
 * the provider asks for one (every buffer starts with ep_attr->msg_prefix_size bytes the
 * provider owns; lengths count them).
 *
 * Without injected loss (the default), every datagram must arrive, and each step checks
 * the data and the completions:
 *   1. ping-pong at 0, 1, inject_size - 1 .. + 1, 1000, 4096 and the largest message
 *      (8928 on EFA, clamped to max_msg_size), ten rounds each, cycling through fi_send,
 *      fi_sendv (prefix and payload in two iovs), fi_sendmsg, fi_senddata, fi_inject and
 *      fi_injectdata against fi_recv, fi_recvv and fi_recvmsg: receive entries have
 *      len = prefix + payload, FI_RECV|FI_MSG, FI_REMOTE_CQ_DATA exactly with data, the
 *      sender as source (FI_SOURCE), the pattern right after the prefix and canaries
 *      after it; send entries FI_SEND|FI_MSG; injects none;
 *   2. a burst of 64 datagrams, all sent before the receiver reads: each arrives exactly
 *      once, in whatever order;
 *   3. the AV: both sides fi_av_remove the peer (a send to the removed fi_addr is
 *      -FI_EINVAL), insert it again, and the next datagrams flow both ways with the new
 *      fi_addr as their source;
 *   4. a send to an address nobody holds any more (an endpoint the server closed)
 *      completes successfully: the sender of a datagram is never told;
 *   5. local errors (efa): a payload above max_msg_size and an inject above inject_size
 *      are -FI_EMSGSIZE; a first iov shorter than the prefix, and FI_DELIVERY_COMPLETE
 *      (unreliable), -FI_EINVAL; a receive buffer too short completes with FI_ETRUNC.
 * With FT_EXPECT_LOSS=1 in the environment (the suite sets it together with EFASIM_LOSS)
 * only the loss step runs: 200 datagrams, every send completes successfully, the
 * receiver gets some and not all, each once and intact, and nothing more after the
 * sender is done.
 */
#include "common/ft_oob.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace ft;

namespace {

enum SendOp { SEND, SENDV, SENDMSG, SENDDATA, INJECT, INJECTDATA, N_SEND };
const char *const send_names[] = {"fi_send", "fi_sendv", "fi_sendmsg", "fi_senddata", "fi_inject", "fi_injectdata"};
enum RecvOp { RECV, RECVV, RECVMSG, N_RECV };
const char *const recv_names[] = {"fi_recv", "fi_recvv", "fi_recvmsg"};

bool is_inject(int op) { return op == INJECT || op == INJECTDATA; }
bool has_data(int op) { return op == SENDDATA || op == INJECTDATA; }

struct Dgram {
	Fabric &fab;
	Oob &oob;
	Endpoint &ep;
	fi_addr_t peer;
	const size_t prefix; /* bytes in front of every buffer */
	const size_t max;    /* largest payload */
	Buffer s1, s2;	     /* send: prefix + payload, and a second iov */
	Buffer r1, r2;	     /* receive */
	fi_context2 rctx{};  /* the one receive posted at a time (steps 1, 3, 4) */
	RecvOp rop = RECV;
	size_t rhalf = 0;    /* bytes of payload the first receive iov holds */

	Dgram(Fabric &f, Oob &o, Endpoint &e, fi_addr_t p, size_t m)
		: fab(f), oob(o), ep(e), peer(p), prefix(f.msg_prefix()), max(m), s1(f, f.msg_prefix() + m),
		  s2(f, m), r1(f, f.msg_prefix() + m + 64), r2(f, m + 64)
	{
	}

	uint64_t data_of(uint32_t seed) const { return fab.cq_data(0xd0000000u + seed); }
	/* The flags a completion must carry: efa adds FI_MSG (udp, for one, does not). */
	uint64_t want(uint64_t dir) const { return dir | (fab.is_efa() ? FI_MSG : 0); }

	/* Posts the receive for the next datagram, with `op`; canaries fill the buffers. */
	void post_recv(RecvOp op)
	{
		rop = op;
		memset(r1.data(), canary, r1.size());
		memset(r2.data(), canary, r2.size());
		rctx = fi_context2{};
		const bool split = op == RECVV && fab.rx_iov_limit() >= 2;
		rhalf = split ? max / 2 : max;
		iovec iov[2] = {{r1.data(), prefix + rhalf}, {r2.data(), max - rhalf}};
		void *desc[2] = {r1.desc(), r2.desc()};
		if (op == RECV) {
			FT_POST(fi_recv(ep, r1.data(), prefix + max, r1.desc(), FI_ADDR_UNSPEC, &rctx));
		} else if (op == RECVV) {
			FT_POST(fi_recvv(ep, iov, desc, split ? 2 : 1, FI_ADDR_UNSPEC, &rctx));
		} else {
			iov[0].iov_len = prefix + max;
			fi_msg msg{iov, desc, 1, FI_ADDR_UNSPEC, &rctx, 0};
			FT_POST(fi_recvmsg(ep, &msg, 0));
		}
	}

	/* The posted receive's datagram: `len` bytes of pattern `seed` from `from`. */
	void expect_datagram(size_t len, uint32_t seed, int sop, fi_addr_t from, const std::string &what)
	{
		Completion c = ep.rx().wait(&rctx, what.c_str());
		FT_CHECK(c.len == prefix + len, "%s: completion len %zu, expected prefix %zu + %zu", what.c_str(), c.len,
			 prefix, len);
		FT_CHECK((c.flags & want(FI_RECV)) == want(FI_RECV), "%s: flags %s", what.c_str(),
			 flags_str(c.flags).c_str());
		if (has_data(sop) && fab.cq_data_size()) {
			FT_CHECK(c.flags & FI_REMOTE_CQ_DATA, "%s: no FI_REMOTE_CQ_DATA", what.c_str());
			FT_CHECK(c.data == data_of(seed), "%s: data 0x%llx, expected 0x%llx", what.c_str(),
				 (unsigned long long)c.data, (unsigned long long)data_of(seed));
		} else {
			FT_CHECK(!(c.flags & FI_REMOTE_CQ_DATA), "%s: FI_REMOTE_CQ_DATA without data", what.c_str());
		}
		if (ep.rx().spec().readfrom)
			FT_CHECK(c.src == from, "%s: source fi_addr %llu, expected %llu", what.c_str(),
				 (unsigned long long)c.src, (unsigned long long)from);
		/* The payload follows the prefix (whose bytes are the provider's), then canaries. */
		const size_t first = std::min(len, rhalf);
		FT_EXPECT_PATTERN(r1.data() + prefix, first, seed, 0, what.c_str());
		FT_EXPECT_BYTES(r1.data() + prefix + first, r1.size() - prefix - first, canary,
				(what + " (after the data)").c_str());
		FT_EXPECT_PATTERN(r2.data(), len - first, seed, first, what.c_str());
		FT_EXPECT_BYTES(r2.data() + (len - first), r2.size() - (len - first), canary,
				(what + " (after the data, second iov)").c_str());
	}

	/* Sends `len` bytes of pattern `seed` to `to` with `op`; waits for its completion. */
	void send(int op, size_t len, uint32_t seed, fi_addr_t to, const std::string &what)
	{
		const bool split = op == SENDV && fab.tx_iov_limit() >= 2 && len >= 2;
		const size_t h = split ? len / 2 : len;
		fill_pattern(s1.data() + prefix, h, seed, 0);
		fill_pattern(s2.data(), len - h, seed, h);
		fi_context2 ctx{};
		iovec iov[2] = {{s1.data(), prefix + h}, {s2.data(), len - h}};
		void *desc[2] = {s1.desc(), s2.desc()};
		fi_msg msg{iov, desc, 1, to, &ctx, 0};
		switch (op) {
		case SEND: FT_POST(fi_send(ep, s1.data(), prefix + len, s1.desc(), to, &ctx)); break;
		case SENDV: FT_POST(fi_sendv(ep, iov, desc, split ? 2 : 1, to, &ctx)); break;
		case SENDMSG: FT_POST(fi_sendmsg(ep, &msg, 0)); break;
		case SENDDATA: FT_POST(fi_senddata(ep, s1.data(), prefix + len, s1.desc(), data_of(seed), to, &ctx)); break;
		case INJECT: FT_POST(fi_inject(ep, s1.data(), prefix + len, to)); break;
		case INJECTDATA: FT_POST(fi_injectdata(ep, s1.data(), prefix + len, data_of(seed), to)); break;
		}
		if (is_inject(op)) {
			memset(s1.data() + prefix, 0, len); /* the buffer is the application's again */
			return;
		}
		Completion c = ep.tx().wait(&ctx, what.c_str());
		FT_CHECK((c.flags & want(FI_SEND)) == want(FI_SEND), "%s: send flags %s", what.c_str(),
			 flags_str(c.flags).c_str());
	}

	/* Step 1. The client pings, the server answers; a receive is always posted before
	 * the peer may send (no loss without injected loss: a missing datagram fails). */
	void pingpong(bool ping_first)
	{
		std::vector<size_t> sizes{0, 1, max, 1000, 4096};
		for (size_t s : {fab.inject_size() - 1, fab.inject_size(), fab.inject_size() + 1})
			if (fab.inject_size() > 0)
				sizes.push_back(s);
		std::erase_if(sizes, [&](size_t s) { return s > max; });
		std::sort(sizes.begin(), sizes.end());
		sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
		post_recv(RECV);
		oob.sync("ping-pong receives posted");
		constexpr int rounds = 10;
		const int total = int(sizes.size()) * rounds;
		int k = 0, pongs = 0;
		for (size_t len : sizes) {
			for (int round = 0; round < rounds; round++, k++) {
				int op = k % N_SEND;
				if (is_inject(op) && len > fab.inject_size())
					op = op == INJECT ? SEND : SENDDATA;
				if (has_data(op) && !fab.cq_data_size())
					op = op == SENDDATA ? SEND : INJECT;
				/* No receive stays posted after the last datagram: the next steps post their own. */
				const bool last = k + 1 == total;
				const RecvOp next = RecvOp((k + 1) % N_RECV);
				const uint32_t ping_seed = uint32_t(10000 + k), pong_seed = uint32_t(20000 + k);
				const std::string name = std::to_string(len) + " bytes, " + send_names[op] + " -> " +
							 recv_names[rop] + " (round " + std::to_string(round) + ")";
				if (ping_first) {
					send(op, len, ping_seed, peer, "ping " + name);
					expect_datagram(len, pong_seed, op, peer, "pong " + name);
					if (!last)
						post_recv(next);
				} else {
					expect_datagram(len, ping_seed, op, peer, "ping " + name);
					if (!last)
						post_recv(next);
					send(op, len, pong_seed, peer, "pong " + name);
				}
				pongs++;
			}
		}
		oob.sync("ping-pong done");
		ep.tx().expect_empty("injects generate no completion");
		note("ping-pong: %d round trips at %zu sizes (prefix %zu) verified", pongs, sizes.size(), prefix);
	}

	/* Step 2: 64 datagrams at once, all receives posted first. Each carries its index
	 * first (patterns of nearby seeds may coincide), then its pattern. */
	void burst(bool sender)
	{
		constexpr int n = 64;
		constexpr size_t len = 1024;
		const size_t slot = prefix + len;
		Buffer buf(fab, n * slot);
		std::vector<fi_context2> ctx(n);
		if (!sender) {
			memset(buf.data(), canary, buf.size());
			for (int i = 0; i < n; i++)
				FT_POST(fi_recv(ep, buf.data() + i * slot, slot, buf.desc(), FI_ADDR_UNSPEC, &ctx[i]));
		}
		oob.sync("burst receives posted");
		if (sender) {
			for (int i = 0; i < n; i++) {
				uint8_t *p = buf.data() + i * slot + prefix;
				memcpy(p, &i, sizeof i);
				fill_pattern(p + sizeof i, len - sizeof i, uint32_t(30000 + i), sizeof i);
				FT_POST(fi_send(ep, p - prefix, slot, buf.desc(), peer, &ctx[i]));
			}
			for (int i = 0; i < n; i++)
				ep.tx().wait(&ctx[i], "burst send");
		} else {
			std::set<int> seen;
			int in_order = 0;
			for (int i = 0; i < n; i++) {
				Completion c = ep.rx().wait(&ctx[i], "burst receive");
				FT_CHECK(c.len == slot, "burst: len %zu", c.len);
				const uint8_t *p = buf.data() + i * slot + prefix;
				int idx;
				memcpy(&idx, p, sizeof idx);
				FT_CHECK(idx >= 0 && idx < n, "burst: receive %d holds datagram index %d", i, idx);
				FT_EXPECT_PATTERN(p + sizeof idx, len - sizeof idx, uint32_t(30000 + idx), sizeof idx,
						  "a burst datagram");
				FT_CHECK(seen.insert(idx).second, "burst: datagram %d delivered twice", idx);
				in_order += idx == i;
			}
			note("burst: %d datagrams, each exactly once (%d in posting order)", n, in_order);
		}
		oob.sync("burst done");
	}

	/* Step 3: remove the peer from the AV, insert it again, transfer. */
	void av_reinsert()
	{
		const fi_addr_t old = peer;
		fab.remove(old);
		if (fab.is_efa())
			FT_EXPECT_RC(fi_send(ep, s1.data(), prefix, s1.desc(), old, nullptr), -FI_EINVAL);
		peer = fab.insert(oob.peer_name());
		post_recv(RECV);
		oob.sync("peer inserted again");
		if (opts.client) {
			send(SEND, 100, 40001, peer, "to the re-inserted address");
			expect_datagram(100, 40002, SEND, peer, "from the re-inserted address");
		} else {
			expect_datagram(100, 40001, SEND, peer, "from the re-inserted address");
			send(SEND, 100, 40002, peer, "to the re-inserted address");
		}
		oob.sync("transfer after re-insert");
		note("AV: the peer removed%s, inserted again as fi_addr %llu, datagrams both ways",
		     fab.is_efa() ? " (a send to it: -FI_EINVAL)" : "", (unsigned long long)peer);
	}

	/* Step 4: a datagram to an endpoint that is gone. */
	void to_nobody()
	{
		if (opts.server) {
			{
				Endpoint gone(fab);
				oob.send_blob(gone.name());
			} /* closed: its address names nobody now */
			oob.sync("endpoint closed");
			oob.sync("sent to nobody");
		} else {
			std::vector<uint8_t> name = oob.recv_blob();
			oob.sync("endpoint closed");
			const fi_addr_t nobody = fab.insert(name);
			send(SEND, 64, 50001, nobody, "a datagram to a closed endpoint");
			fab.remove(nobody);
			oob.sync("sent to nobody");
			note("a send to a closed endpoint completed successfully");
		}
	}

	/* Step 5: what the provider refuses, and truncation (efa's rules). */
	void local_errors()
	{
		const size_t inj = fab.inject_size();
		FT_EXPECT_RC(fi_send(ep, s1.data(), prefix + fab.max_msg_size() + 1, s1.desc(), peer, nullptr),
			     -FI_EMSGSIZE);
		std::vector<uint8_t> big(prefix + inj + 1);
		FT_EXPECT_RC(fi_inject(ep, big.data(), big.size(), peer), -FI_EMSGSIZE);
		if (prefix) {
			FT_EXPECT_RC(fi_send(ep, s1.data(), prefix - 1, s1.desc(), peer, nullptr), -FI_EINVAL);
			FT_EXPECT_RC(fi_inject(ep, s1.data(), prefix - 1, peer), -FI_EINVAL);
			fi_context2 c{};
			FT_EXPECT_RC(fi_recv(ep, r2.data(), prefix - 1, r2.desc(), FI_ADDR_UNSPEC, &c), -FI_EINVAL);
		}
		iovec iov{s1.data(), prefix + 8};
		void *desc = s1.desc();
		fi_context2 ctx{};
		fi_msg msg{&iov, &desc, 1, peer, &ctx, 0};
		FT_EXPECT_RC(fi_sendmsg(ep, &msg, FI_DELIVERY_COMPLETE), -FI_EINVAL);
		/* A receive of 8 bytes gets a datagram of 100: truncated. */
		fi_context2 rctx2{};
		if (opts.server) {
			FT_POST(fi_recv(ep, r1.data(), prefix + 8, r1.desc(), FI_ADDR_UNSPEC, &rctx2));
			oob.sync("short receive posted");
			Completion c = ep.rx().wait_error(&rctx2, "a datagram longer than its receive buffer");
			FT_CHECK(c.err == FI_ETRUNC, "truncation: err %d (%s)", c.err, fi_strerror(c.err));
			FT_CHECK(c.len == prefix + 8, "truncation: len %zu", c.len);
			note("truncation: %s", c.describe().c_str());
		} else {
			oob.sync("short receive posted");
			send(SEND, 100, 60001, peer, "a datagram for a short buffer");
		}
		oob.sync("truncation checked");
		note("local errors: oversize and inject -FI_EMSGSIZE, no prefix and FI_DELIVERY_COMPLETE -FI_EINVAL");
	}
};

/* The loss step (FT_EXPECT_LOSS=1): the device drops some datagrams for good. */
void loss(Fabric &fab, Oob &oob, Endpoint &ep, fi_addr_t peer)
{
	constexpr int n = 200;
	constexpr size_t len = 256;
	const size_t prefix = fab.msg_prefix();
	const size_t slot = prefix + len;
	Buffer buf(fab, n * slot);
	std::vector<fi_context2> ctx(n);
	if (opts.server) {
		memset(buf.data(), canary, buf.size());
		for (int i = 0; i < n; i++)
			FT_POST(fi_recv(ep, buf.data() + i * slot, slot, buf.desc(), FI_ADDR_UNSPEC, &ctx[i]));
		oob.sync("loss receives posted");
		oob.sync("loss sent");
		/* Every datagram the device did not drop is at this device by now (the client's
		 * sends completed once on the wire, and the wire is this host's loopback):
		 * reading until the CQ is empty takes them all. */
		std::set<int> got;
		alignas(fi_cq_data_entry) uint8_t e[sizeof(fi_cq_data_entry)];
		for (;;) {
			ssize_t rc = fi_cq_read(ep.rx().get(), e, 1);
			if (rc == -FI_EAGAIN)
				break;
			if (rc == -FI_EAVAIL) {
				Completion c = ep.rx().read_error();
				FT_FAIL("loss: an error entry: %s", c.describe().c_str());
			}
			FT_CHECK(rc == 1, "fi_cq_read returned %zd", rc);
			Completion c = ep.rx().convert(e, FI_ADDR_NOTAVAIL);
			const auto *at = static_cast<fi_context2 *>(c.ctx);
			FT_CHECK(at >= ctx.data() && at < ctx.data() + n, "loss: an unknown context");
			const uint8_t *p = buf.data() + size_t(at - ctx.data()) * slot + prefix;
			int idx;
			memcpy(&idx, p, sizeof idx);
			FT_CHECK(idx >= 0 && idx < n, "loss: datagram index %d", idx);
			FT_CHECK(c.len == slot, "loss: len %zu", c.len);
			FT_EXPECT_PATTERN(p + sizeof idx, len - sizeof idx, uint32_t(70000 + idx), sizeof idx, "a datagram");
			FT_CHECK(got.insert(idx).second, "loss: datagram %d delivered twice", idx);
		}
		FT_CHECK(!got.empty(), "loss: no datagram arrived");
		FT_CHECK(got.size() < size_t(n), "loss: all %d datagrams arrived although the device drops some", n);
		note("loss: %zu of %d datagrams arrived, each once and intact; %zu were lost, and their sends "
		     "completed successfully", got.size(), n, size_t(n) - got.size());
		oob.put(uint32_t(got.size()));
	} else {
		oob.sync("loss receives posted");
		for (int i = 0; i < n; i++) {
			uint8_t *p = buf.data() + i * slot + prefix;
			fill_pattern(p, len, uint32_t(70000 + i));
			memcpy(p, &i, sizeof i);
			FT_POST(fi_send(ep, p - prefix, slot, buf.desc(), peer, &ctx[i]));
		}
		for (int i = 0; i < n; i++)
			ep.tx().wait(&ctx[i], "a send (lost or not)");
		oob.sync("loss sent");
		const uint32_t got = oob.get<uint32_t>();
		note("loss: all %d sends completed successfully; the receiver got %u", n, got);
	}
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "FI_EP_DGRAM: ping-pong, bursts, AV re-insert, sends to nobody, loss");
	opts.ep_type = FI_EP_DGRAM;
	const bool expect_loss = getenv("FT_EXPECT_LOSS") && !strcmp(getenv("FT_EXPECT_LOSS"), "1");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV, FI_SOURCE);
	Oob oob;
	CqSpec rx;
	rx.readfrom = fab.has(FI_SOURCE);
	rx.progress = !expect_loss; /* the loss step reads it itself */
	Endpoint ep(fab, CqSpec{}, rx);
	fi_addr_t peer = oob.exchange_names(fab, ep);
	if (expect_loss) {
		loss(fab, oob, ep, peer);
		return 0;
	}
	const size_t max = std::min<size_t>(8928, fab.max_msg_size());
	if (fab.cq_data_size() == 0)
		note("cq_data_size is 0: fi_senddata and fi_injectdata carry no data to check");
	Dgram d(fab, oob, ep, peer, max);
	d.pingpong(opts.client);
	d.burst(opts.client);
	d.av_reinsert();
	d.to_nobody();
	if (fab.is_efa())
		d.local_errors();
	else
		note("not efa: the local error rules are efa's, not checked");
	return 0;
}
