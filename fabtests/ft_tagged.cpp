/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_tagged: tagged messages of every size, through every tagged call, matched every way.
 *
 * The client process opens two endpoints, A and B; the server one. Parts, in order:
 *
 *  1. sizes 0, 1, 63, 64, 4095, 4096, 8191, 8192, 8193, 65535, 65536, 65537, 1 MiB - 1,
 *     1 MiB, 4 MiB, and inject_size and the link MTU (nic) each -1, exact and +1
 *     and, with -L, 64 MiB (clamped to max_msg_size): fi_tsend -> fi_trecv with the
 *     receive posted before the message arrives (expected) and after (unexpected);
 *     fi_tsenddata -> fi_trecvmsg; fi_tsendmsg(FI_REMOTE_CQ_DATA) with 1..4 iovs ->
 *     fi_trecvmsg with 1..4 iovs (rotating); fi_tsendv -> fi_trecvv; fi_tinject and
 *     fi_tinjectdata up to inject_size (the buffer is overwritten at return, no
 *     completion ever appears); and, when mr_mode lacks FI_MR_LOCAL, unregistered
 *     buffers with NULL descriptors on both sides.
 *  2. every pair of iov counts 1..4 (tx/rx iov_limit) at 7 and 65537 bytes.
 *  3. tag + ignore: a receive with ignore bits takes only messages whose other bits
 *     match, exact and wildcard (ignore ~0) receives, expected and unexpected; the
 *     completion carries the sender's full tag.
 *  4. two senders (A and B) to FI_ADDR_UNSPEC receives; with FI_DIRECTED_RECV, a
 *     receive for B posted before one for A must not take A's message, expected and
 *     unexpected.
 *  5. ordering (FI_ORDER_SAS): 96 messages of mixed sizes (up to 300 KiB) with one tag
 *     land in the receives in send order, expected and unexpected.
 *  6. the server sends to the client (expected and unexpected, 0 B .. 1 MiB).
 *  7. truncation, last: a receive shorter than the message completes in error with
 *     FI_ETRUNC, len = the receive's size and olen = the rest (fi_cq(3), fi_cq_readerr),
 *     the first len bytes placed and nothing after them written (1000 B, 10000 B,
 *     65537 B and 1 MiB messages, expected and unexpected, into receives of two iovs and
 *     of rx_attr->iov_limit iovs); the send completes successfully. On a provider known to tear the connection down after a truncated
 *     receive (tcp;ofi_rxm, see known_broken in common/ft_fabric.cpp) only the first runs.
 *
 * Checked for every message: every byte (a pattern of the message and the position) and
 * the canary bytes between and after the receive iovs; the receive entry's op_context,
 * len, tag, flags (FI_RECV|FI_TAGGED, not FI_SEND; FI_REMOTE_CQ_DATA exactly when data
 * was sent; FI_MSG is not checked: the sockets provider sets it too, and fi_cq(3) does
 * not forbid it) and data; with FI_SOURCE, the source fi_addr_t; the send entry's
 * op_context and FI_SEND|FI_TAGGED. FI_ORDER_SAS is asked for (request_order) when the
 * provider's info does not show it.
 *
 * Expected vs unexpected: for "expected" the receiver posts, then says so on the control
 * channel, then the sender sends. For "unexpected" the sender sends, then (with
 * FI_ORDER_SAS) a zero-byte marker message with another tag, then says so; the receiver
 * first receives the marker: by send-after-send ordering the message before it has then
 * been taken in as unexpected, so its receive is posted after its arrival, without
 * sleeping. Without FI_ORDER_SAS only the control-channel order is there (said once).
 */
#include "common/ft_rdm.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

enum SendKind { TSEND, TSENDV, TSENDDATA, TINJECT, TINJECTDATA, TSENDMSG, UNREG_SEND };
const char *const send_names[] = {"fi_tsend",	"fi_tsendv",   "fi_tsenddata",
				  "fi_tinject", "fi_tinjectdata", "fi_tsendmsg",
				  "fi_tsend(unregistered, NULL desc)"};
enum RecvKind { TRECV, TRECVV, TRECVMSG, UNREG_RECV };
const char *const recv_names[] = {"fi_trecv", "fi_trecvv", "fi_trecvmsg",
				  "fi_trecv(unregistered, NULL desc)"};

constexpr size_t gap = 64;	  /* canary bytes between iov pieces and after the last */
constexpr uint64_t marker_tag = 0x4d41524b00000000ull; /* "MARK" */

struct Case {
	SendKind s = TSEND;
	RecvKind r = TRECV;
	size_t len = 0;
	int siov = 1, riov = 1;
	bool unexpected = false;
	bool data = false;
	bool reverse = false;	/* server -> client */
	size_t cap = 0;		/* receive capacity; < len: truncation */
	uint64_t tag = 0;
	uint32_t seed = 0;
	std::string name;
};

struct Piece {
	size_t off, cap;
};

/* n pieces holding `len` bytes in uneven parts (the last gets `slack` more room), each
 * followed by `gap` canary bytes. */
std::vector<Piece> layout(size_t len, int n, size_t slack, uint32_t salt)
{
	std::vector<Piece> p(static_cast<size_t>(n));
	size_t wsum = 0;
	for (int i = 0; i < n; i++)
		wsum += size_t((i + salt) % 3 + 1);
	size_t off = 0, left = len;
	for (int i = 0; i < n; i++) {
		size_t part = i == n - 1 ? left : len * size_t((i + salt) % 3 + 1) / wsum;
		part = std::min(part, left);
		left -= part;
		p[size_t(i)] = {off, part + (i == n - 1 ? slack : 0)};
		off += p[size_t(i)].cap + gap;
	}
	return p;
}

size_t extent(const std::vector<Piece> &p)
{
	return p.back().off + p.back().cap + gap;
}

struct Test {
	Fabric &fab;
	Ctl &ctl;
	Endpoint &ep;	   /* the server's, or the client's A */
	Endpoint *ep_b;	   /* the client's B */
	fi_addr_t peer;	   /* server: A; client: the server */
	fi_addr_t peer_b;  /* server: B */
	size_t max;
	Buffer sbuf, rbuf, mbuf;
	std::unique_ptr<Plain> usbuf, urbuf; /* unregistered, when FI_MR_LOCAL is not required */
	bool sas, src, cq_data;
	int ntx, nrx;
	int n_done = 0;

	Test(Fabric &f, Ctl &c, Endpoint &e, Endpoint *b, fi_addr_t p, fi_addr_t pb, size_t m,
	     size_t unreg)
		: fab(f), ctl(c), ep(e), ep_b(b), peer(p), peer_b(pb), max(m),
		  sbuf(f, std::max<size_t>(m + 5 * gap + 4096, 4u << 20)),
		  rbuf(f, std::max<size_t>(m + 5 * gap + 4096, 30u << 20)), mbuf(f, 4096)
	{
		if (unreg) {
			usbuf = std::make_unique<Plain>(unreg + 4096);
			urbuf = std::make_unique<Plain>(unreg + 4096);
		}
		sas = has_order(f, FI_ORDER_SAS);
		src = f.has(FI_SOURCE);
		cq_data = f.cq_data_size() > 0;
		ntx = int(std::min<size_t>(4, f.tx_iov_limit()));
		nrx = int(std::min<size_t>(4, f.rx_iov_limit()));
	}

	uint64_t data_of(const Case &c) const { return fab.cq_data(0xda7a000000000000ull + c.seed); }
	bool sender(const Case &c) const { return c.reverse ? opts.server : opts.client; }

	/* ---------------------------------------------------------- the sender's side */
	void post_send(Endpoint &e, fi_addr_t to, const Case &c, fi_context2 *ctx)
	{
		uint8_t *base = c.s == UNREG_SEND ? usbuf->data() : sbuf.data();
		void *desc = c.s == UNREG_SEND ? nullptr : sbuf.desc();
		int n = c.s == TSENDMSG || c.s == TSENDV ? c.siov : 1;
		auto pieces = layout(c.len, n, 0, c.seed);
		size_t k = 0;
		std::vector<iovec> iov;
		std::vector<void *> descs;
		for (auto &p : pieces) {
			fill_pattern(base + p.off, p.cap, c.seed, k);
			k += p.cap;
			iov.push_back({base + p.off, p.cap});
			descs.push_back(desc);
		}
		const uint64_t d = data_of(c);
		switch (c.s) {
		case TSEND:
		case UNREG_SEND:
			FT_POST(fi_tsend(e, base, c.len, desc, to, c.tag, ctx));
			break;
		case TSENDV:
			FT_POST(fi_tsendv(e, iov.data(), descs.data(), iov.size(), to, c.tag, ctx));
			break;
		case TSENDDATA:
			FT_POST(fi_tsenddata(e, base, c.len, desc, d, to, c.tag, ctx));
			break;
		case TINJECT: FT_POST(fi_tinject(e, base, c.len, to, c.tag)); break;
		case TINJECTDATA: FT_POST(fi_tinjectdata(e, base, c.len, d, to, c.tag)); break;
		case TSENDMSG: {
			fi_msg_tagged m{iov.data(), descs.data(), iov.size(), to, c.tag, 0, ctx,
					c.data ? d : 0};
			FT_POST(fi_tsendmsg(e, &m, c.data ? FI_REMOTE_CQ_DATA : 0));
			break;
		}
		}
		if (c.s == TINJECT || c.s == TINJECTDATA)
			memset(base, 0, c.len); /* the buffer is the application's again */
	}

	void send_marker(Endpoint &e, fi_addr_t to, uint64_t tag)
	{
		if (fab.inject_size() > 0) {
			FT_POST(fi_tinject(e, nullptr, 0, to, tag));
		} else {
			fi_context2 ctx{};
			FT_POST(fi_tsend(e, nullptr, 0, nullptr, to, tag, &ctx));
			e.tx().wait(&ctx, "the marker send");
		}
	}

	void wait_send(Endpoint &e, const Case &c, fi_context2 *ctx)
	{
		if (c.s == TINJECT || c.s == TINJECTDATA)
			return;
		Entry se = e.tx().wait(ctx, c.name + " (send)");
		expect_flags(se, FI_SEND | FI_TAGGED, FI_RECV, c.name + " (send)");
	}

	void send(const Case &c)
	{
		fi_context2 ctx{};
		if (!c.unexpected) {
			ctl.sync("posted " + c.name);
			post_send(ep, peer, c, &ctx);
			wait_send(ep, c, &ctx);
		} else {
			post_send(ep, peer, c, &ctx);
			if (sas)
				send_marker(ep, peer, marker_tag | c.seed);
			ctl.notify("sent " + c.name);
			wait_send(ep, c, &ctx);
		}
		ctl.sync("checked " + c.name);
		if (c.s == TINJECT || c.s == TINJECTDATA)
			ep.tx().expect_empty(c.name + ": an inject generates no completion");
	}

	/* ---------------------------------------------------------- the receiver's side */
	/* Receives the marker that follows an unexpected message (see the top). */
	void take_marker(Endpoint &e, uint64_t tag, fi_addr_t from, const std::string &what)
	{
		fi_context2 ctx{};
		FT_POST(fi_trecv(e, mbuf.data(), 8, mbuf.desc(), FI_ADDR_UNSPEC, tag, 0, &ctx));
		Entry me = e.rx().wait(&ctx, "the marker after " + what);
		FT_CHECK(me.len == 0 && me.tag == tag, "%s: marker entry %s", what.c_str(),
			 me.describe().c_str());
		if (src)
			FT_CHECK(me.src == from, "%s: marker from fi_addr %llu, expected %llu",
				 what.c_str(), (unsigned long long)me.src, (unsigned long long)from);
	}

	std::vector<Piece> recv_layout(const Case &c) const
	{
		size_t cap = c.cap ? c.cap : c.len;
		switch (c.r) {
		case TRECV:
		case UNREG_RECV: return layout(cap, 1, c.cap ? 0 : 100, 0);
		case TRECVV:
		case TRECVMSG: return layout(cap, c.riov, c.cap ? 0 : 33, c.seed + 1);
		}
		return {};
	}

	void post_recv(Endpoint &e, const Case &c, const std::vector<Piece> &pieces,
		       fi_addr_t from, fi_context2 *ctx)
	{
		uint8_t *base = c.r == UNREG_RECV ? urbuf->data() : rbuf.data();
		void *desc = c.r == UNREG_RECV ? nullptr : rbuf.desc();
		memset(base, canary, extent(pieces));
		std::vector<iovec> iov;
		std::vector<void *> descs;
		for (auto &p : pieces) {
			iov.push_back({base + p.off, p.cap});
			descs.push_back(desc);
		}
		switch (c.r) {
		case TRECV:
		case UNREG_RECV:
			FT_POST(fi_trecv(e, base, pieces[0].cap, desc, from, c.tag, 0, ctx));
			break;
		case TRECVV:
			FT_POST(fi_trecvv(e, iov.data(), descs.data(), iov.size(), from, c.tag, 0,
					   ctx));
			break;
		case TRECVMSG: {
			fi_msg_tagged m{iov.data(), descs.data(), iov.size(), from, c.tag, 0, ctx, 0};
			FT_POST(fi_trecvmsg(e, &m, 0));
			break;
		}
		}
	}

	/* The data across the pieces, then canaries; `got` bytes were placed. */
	void check_data(const Case &c, const std::vector<Piece> &pieces, size_t got)
	{
		const uint8_t *base = c.r == UNREG_RECV ? urbuf->data() : rbuf.data();
		size_t k = 0;
		for (size_t i = 0; i < pieces.size(); i++) {
			const Piece &p = pieces[i];
			size_t n = std::min(p.cap, got - k);
			std::string what = c.name + ", receive iov " + std::to_string(i);
			FT_EXPECT_PATTERN(base + p.off, n, c.seed, k, what.c_str());
			FT_EXPECT_BYTES(base + p.off + n, p.cap - n + gap, canary,
					(what + " after the data").c_str());
			k += n;
		}
	}

	void check_entry(const Case &c, const Entry &e, fi_addr_t from, size_t len)
	{
		const char *n = c.name.c_str();
		FT_CHECK(e.len == len, "%s: completion len %zu, expected %zu", n, e.len, len);
		FT_CHECK(e.tag == c.tag, "%s: completion tag 0x%llx, expected 0x%llx", n,
			 (unsigned long long)e.tag, (unsigned long long)c.tag);
		bool d = c.data || c.s == TSENDDATA || c.s == TINJECTDATA;
		expect_flags(e, FI_RECV | FI_TAGGED | (d ? FI_REMOTE_CQ_DATA : 0),
			     FI_SEND | (d ? 0 : FI_REMOTE_CQ_DATA), c.name);
		if (d)
			FT_CHECK(e.data == data_of(c), "%s: remote CQ data 0x%llx, expected 0x%llx",
				 n, (unsigned long long)e.data, (unsigned long long)data_of(c));
		if (src && !e.error)
			FT_CHECK(e.src == from, "%s: source fi_addr %llu, expected %llu", n,
				 (unsigned long long)e.src, (unsigned long long)from);
	}

	void receive(const Case &c)
	{
		fi_context2 ctx{};
		auto pieces = recv_layout(c);
		fi_addr_t from = peer;
		if (!c.unexpected) {
			post_recv(ep, c, pieces, FI_ADDR_UNSPEC, &ctx);
			ctl.sync("posted " + c.name);
		} else {
			ctl.await("sent " + c.name);
			if (sas)
				take_marker(ep, marker_tag | c.seed, from, c.name);
			post_recv(ep, c, pieces, FI_ADDR_UNSPEC, &ctx);
		}
		if (c.cap && c.cap < c.len) {
			Entry e = ep.rx().wait_error(&ctx, c.name);
			debug("%s: %s", c.name.c_str(), e.describe().c_str());
			FT_CHECK(e.err == FI_ETRUNC, "%s: err %d (%s), expected FI_ETRUNC",
				 c.name.c_str(), e.err, fi_strerror(e.err));
			/* fi_cq(3), fi_cq_readerr: len is the "size of received data", olen
			 * "the amount of data that did not fit ... and was discarded". */
			deviation(fab, e.len == c.cap && e.olen == c.len - c.cap, Loc::current(),
				  "%s: FI_ETRUNC entry has len %zu and olen %zu, expected %zu and %zu",
				  c.name.c_str(), e.len, e.olen, c.cap, c.len - c.cap);
			deviation(fab, e.len <= c.cap, Loc::current(),
				  "%s: FI_ETRUNC entry len %zu exceeds the receive's %zu", c.name.c_str(), e.len,
				  c.cap);
			check_entry(c, e, from, e.len);
			/* The first len bytes are the message's, nothing after them changed. */
			check_data(c, pieces, std::min(e.len, c.cap));
		} else {
			Entry e = ep.rx().wait(&ctx, c.name);
			check_entry(c, e, from, c.len);
			check_data(c, pieces, c.len);
		}
		ctl.sync("checked " + c.name);
	}

	void run(const Case &c)
	{
		debug("case %s", c.name.c_str());
		sender(c) ? send(c) : receive(c);
		n_done++;
	}

	/* ---------------------------------------------------------- parts */
	Case make(SendKind s, RecvKind r, size_t len, bool unexp, int siov = 1, int riov = 1,
		  bool data = false)
	{
		Case c;
		c.s = s;
		c.r = r;
		c.len = len;
		c.unexpected = unexp;
		c.siov = siov;
		c.riov = riov;
		c.data = data;
		c.seed = uint32_t(1000 + n_cases++);
		/* 64-bit tags, high bits set. */
		c.tag = 0xc000000000000000ull | (uint64_t(c.seed) << 24) | 0x5a;
		c.name = std::string(send_names[s]) +
			 (s == TSENDMSG || s == TSENDV ? "(" + std::to_string(siov) + " iov" +
								 (data ? ", FI_REMOTE_CQ_DATA" : "") + ")"
						       : "") +
			 " -> " + recv_names[r] +
			 (r == TRECVMSG || r == TRECVV ? "(" + std::to_string(riov) + " iov)" : "") +
			 ", " + size_str(len) + (unexp ? ", unexpected" : ", expected");
		return c;
	}
	int n_cases = 0;

	void part_sizes(const std::vector<size_t> &sizes)
	{
		bool unreg = usbuf != nullptr;
		int i = 0;
		for (size_t len : sizes) {
			bool big = len > (4u << 20);
			run(make(TSEND, TRECV, len, false));
			run(make(TSEND, TRECV, len, true));
			if (cq_data)
				run(make(TSENDDATA, TRECVMSG, len, i % 2 == 1, 1, 1));
			int siov = 1 + i % ntx, riov = 1 + (i + 1) % nrx;
			run(make(TSENDMSG, TRECVMSG, len, i % 2 == 0, siov, riov, cq_data));
			if (!big)
				run(make(TSENDV, TRECVV, len, i % 2 == 1, std::min(2, ntx),
					 std::min(3, nrx)));
			if (len <= fab.inject_size()) {
				run(make(TINJECT, TRECV, len, false));
				run(make(TINJECT, TRECV, len, true));
				if (cq_data)
					run(make(TINJECTDATA, TRECV, len, i % 2 == 0));
			}
			if (unreg && !big) {
				run(make(UNREG_SEND, UNREG_RECV, len, false));
				run(make(UNREG_SEND, UNREG_RECV, len, true));
			}
			i++;
		}
	}

	void part_iovs()
	{
		for (size_t len : {size_t(7), size_t(65537)})
			for (int s = 1; s <= ntx; s++)
				for (int r = 1; r <= nrx; r++)
					run(make(TSENDMSG, TRECVMSG, len, (s + r) % 2 == 1, s, r,
						 false));
	}

	/* Run last: on a provider known to tear the connection down after a truncated
	 * receive (see known_broken), only the first case runs. */
	void part_truncation()
	{
		struct T {
			size_t len, cap;
			RecvKind r;
		};
		const T list[] = {{1000, 100, TRECV},
				  {10000, 4096, TRECVMSG},
				  {65537, 4096, TRECVMSG},
				  {(1u << 20) + 3, 65536, TRECVMSG}};
		bool one = known_broken(fab, "a second truncated message");
		const bool big = !known_broken(fab, "a truncated 1 MiB message");
		for (bool unexp : {false, true}) {
			for (auto [len, cap, r] : list) {
				if (len > max || (len > 65537 && !big))
					continue;
				/* Two iovs, and as many as rx_attr->iov_limit allows (a provider
				 * that adds an iov of its own for the overflow has none left). */
				std::vector<int> riovs{std::min(2, nrx)};
				if (r != TRECV && nrx > riovs[0])
					riovs.push_back(nrx);
				for (int riov : riovs) {
					Case c = make(TSEND, r, len, unexp, 1, riov);
					c.cap = cap;
					c.name += " into a " + size_str(cap) + " receive (truncated)";
					run(c);
					if (one)
						return;
				}
			}
		}
	}

	void part_reverse()
	{
		for (size_t len : {size_t(0), size_t(4096), size_t(1) << 20}) {
			if (len > max)
				continue;
			for (bool unexp : {false, true}) {
				Case c = make(TSEND, TRECV, len, unexp);
				c.reverse = true;
				c.name += " (server to client)";
				run(c);
			}
		}
	}

	/* Tag + ignore. Receives: R1 tag T ignore 0xff, R2 tag T^0x100 exact, R3 ignore ~0.
	 * Messages in order: T^0x100 (R2: R1 does not match bit 8), T^0x42 (R1, posted
	 * before R3), 0x123456789 (R3 only). Then unexpected: T|0x37 and T|0x99 into two
	 * receives tag T ignore 0xff, in send order. */
	void part_ignore()
	{
		const uint64_t T = 0xa5a5000012345600ull;
		const uint64_t sent[] = {T ^ 0x100, T ^ 0x42, 0x123456789ull};
		const char *what[] = {"tag T^0x100 -> the exact receive (not the one ignoring 0xff)",
				      "tag T^0x42 -> the receive ignoring 0xff",
				      "tag 0x123456789 -> the wildcard receive (ignore ~0)"};
		if (opts.client) {
			ctl.sync("ignore posted");
			for (int i = 0; i < 3; i++) {
				fill_pattern(sbuf.data(), 100, 500 + i);
				fi_context2 ctx{};
				FT_POST(fi_tsend(ep, sbuf.data(), 100, sbuf.desc(), peer, sent[i], &ctx));
				ep.tx().wait(&ctx, what[i]);
			}
			fill_pattern(sbuf.data(), 100, 510);
			fill_pattern(sbuf.data() + 100, 100, 511);
			fi_context2 c4{}, c5{};
			FT_POST(fi_tsend(ep, sbuf.data(), 100, sbuf.desc(), peer, T | 0x37, &c4));
			FT_POST(fi_tsend(ep, sbuf.data() + 100, 100, sbuf.desc(), peer, T | 0x99, &c5));
			if (sas)
				send_marker(ep, peer, marker_tag | 1);
			ctl.notify("ignore sent");
			ep.tx().wait(&c4, "tag T|0x37");
			ep.tx().wait(&c5, "tag T|0x99");
			ctl.sync("ignore checked");
			return;
		}
		/* server */
		fi_context2 ctx[3]{};
		const uint64_t rtag[] = {T, T ^ 0x100, 0};
		const uint64_t rign[] = {0xff, 0, ~0ull};
		const int got_by[] = {1, 0, 2}; /* message i lands in receive got_by[i] */
		for (int r = 0; r < 3; r++) {
			memset(rbuf.data() + 256 * r, canary, 256);
			FT_POST(fi_trecv(ep, rbuf.data() + 256 * r, 200, rbuf.desc(), FI_ADDR_UNSPEC,
					  rtag[r], rign[r], &ctx[r]));
		}
		ctl.sync("ignore posted");
		for (int i = 0; i < 3; i++) {
			int r = got_by[i];
			Entry e = ep.rx().wait(&ctx[r], what[i]);
			FT_CHECK(e.tag == sent[i] && e.len == 100,
				 "%s: receive %d completed with tag 0x%llx len %zu, expected tag "
				 "0x%llx len 100",
				 what[i], r, (unsigned long long)e.tag, e.len,
				 (unsigned long long)sent[i]);
			expect_flags(e, FI_RECV | FI_TAGGED, FI_SEND | FI_REMOTE_CQ_DATA, what[i]);
			FT_EXPECT_PATTERN(rbuf.data() + 256 * r, 100, 500 + i, 0, what[i]);
			FT_EXPECT_BYTES(rbuf.data() + 256 * r + 100, 156, canary, what[i]);
		}
		ctl.await("ignore sent");
		if (sas)
			take_marker(ep, marker_tag | 1, peer, "the ignore-bits messages");
		fi_context2 c4{}, c5{};
		memset(rbuf.data(), canary, 512);
		FT_POST(fi_trecv(ep, rbuf.data(), 200, rbuf.desc(), FI_ADDR_UNSPEC, T, 0xff, &c4));
		FT_POST(fi_trecv(ep, rbuf.data() + 256, 200, rbuf.desc(), FI_ADDR_UNSPEC, T, 0xff,
				  &c5));
		Entry e4 = ep.rx().wait(&c4, "unexpected tag T|0x37 into a receive ignoring 0xff");
		Entry e5 = ep.rx().wait(&c5, "unexpected tag T|0x99 into a receive ignoring 0xff");
		FT_CHECK(e4.tag == (T | 0x37) && e5.tag == (T | 0x99),
			 "unexpected messages with ignore bits: tags 0x%llx, 0x%llx, expected 0x%llx, "
			 "0x%llx (send order)",
			 (unsigned long long)e4.tag, (unsigned long long)e5.tag,
			 (unsigned long long)(T | 0x37), (unsigned long long)(T | 0x99));
		FT_EXPECT_PATTERN(rbuf.data(), 100, 510, 0, "unexpected tag T|0x37");
		FT_EXPECT_PATTERN(rbuf.data() + 256, 100, 511, 0, "unexpected tag T|0x99");
		ctl.sync("ignore checked");
		note("tag + ignore bits: exact, masked and wildcard receives, expected and "
		     "unexpected: verified");
	}

	/* Two senders. Returns after both sides checked. */
	void part_two_peers(bool directed)
	{
		const uint64_t T = 0x7e57000000000000ull | (directed ? 1 : 2);
		const size_t lens[2] = {300, 70000}; /* A's, B's */
		std::string tag = directed ? "directed" : "any-source";
		for (bool unexp : {false, true}) {
			std::string step = tag + (unexp ? " unexpected" : " expected");
			if (opts.client) {
				Endpoint *eps[2] = {&ep, ep_b};
				fi_context2 ctx[2]{};
				if (!unexp)
					ctl.sync(step + " posted");
				for (int i = 0; i < 2; i++) {
					fill_pattern(sbuf.data() + i * 131072, lens[i], 700 + i);
					FT_POST(fi_tsend(*eps[i], sbuf.data() + i * 131072, lens[i],
							  sbuf.desc(), peer, T, &ctx[i]));
					/* A's message goes first (when expected: completes first). */
					if (!unexp)
						eps[i]->tx().wait(&ctx[i], step + " send");
					else if (sas)
						send_marker(*eps[i], peer, marker_tag | (0x100 + i));
				}
				if (unexp) {
					ctl.notify(step + " sent");
					for (int i = 0; i < 2; i++)
						eps[i]->tx().wait(&ctx[i], step + " send");
				}
				ctl.sync(step + " checked");
				continue;
			}
			/* server: receive 0 for B (posted first), receive 1 for A */
			fi_addr_t from[2] = {peer_b, peer};
			fi_context2 ctx[2]{};
			auto post = [&]() {
				memset(rbuf.data(), canary, 2 * 131072);
				for (int r = 0; r < 2; r++)
					FT_POST(fi_trecv(ep, rbuf.data() + r * 131072, 100000,
							  rbuf.desc(), directed ? from[r] : FI_ADDR_UNSPEC,
							  T, 0, &ctx[r]));
			};
			if (!unexp) {
				post();
				ctl.sync(step + " posted");
			} else {
				ctl.await(step + " sent");
				if (sas) {
					take_marker(ep, marker_tag | 0x100, peer, step + " (A)");
					take_marker(ep, marker_tag | 0x101, peer_b, step + " (B)");
				}
				post();
			}
			int seen[2] = {0, 0};
			for (int r = 0; r < 2; r++) {
				Entry e = ep.rx().wait(&ctx[r], step + " receive " + std::to_string(r));
				/* Which sender's message is it? */
				int who = e.len == lens[0] ? 0 : e.len == lens[1] ? 1 : -1;
				FT_CHECK(who >= 0, "%s: receive %d got %zu bytes, neither A's nor B's",
					 step.c_str(), r, e.len);
				if (directed) {
					int want = r == 0 ? 1 : 0;
					FT_CHECK(who == want,
						 "%s: the receive directed to %s took %s's message",
						 step.c_str(), want ? "B" : "A", who ? "B" : "A");
				}
				/* Any-source receives take the messages in arrival order, which
				 * nothing promises across two senders: each is told by its length
				 * and checked by content and source. */
				seen[who]++;
				FT_CHECK(e.tag == T, "%s: tag 0x%llx", step.c_str(),
					 (unsigned long long)e.tag);
				if (src)
					FT_CHECK(e.src == (who ? peer_b : peer),
						 "%s: %s's message reported from fi_addr %llu, expected %llu",
						 step.c_str(), who ? "B" : "A", (unsigned long long)e.src,
						 (unsigned long long)(who ? peer_b : peer));
				FT_EXPECT_PATTERN(rbuf.data() + r * 131072, lens[who], 700 + who, 0,
						  (step + " data").c_str());
				FT_EXPECT_BYTES(rbuf.data() + r * 131072 + lens[who], 100000 - lens[who],
						canary, (step + " after the data").c_str());
			}
			FT_CHECK(seen[0] == 1 && seen[1] == 1,
				 "%s: the two receives got %d of A's and %d of B's messages", step.c_str(),
				 seen[0], seen[1]);
			ctl.sync(step + " checked");
		}
		if (opts.server)
			note("two senders, %s receives, expected and unexpected: verified",
			     directed ? "FI_DIRECTED_RECV" : "FI_ADDR_UNSPEC");
	}

	/* n messages with one tag land in send order. */
	void part_order()
	{
		const int n = 96;
		const size_t cap = 300 * 1024 + 64;
		const uint64_t T = 0x0dde000000000777ull;
		auto len_of = [](int i) -> size_t {
			if (i % 16 == 5)
				return 300 * 1024;
			if (i % 8 == 3)
				return 32 * 1024 + size_t(i);
			return size_t(i) * 37 % 2000;
		};
		size_t max_total = 0;
		for (int i = 0; i < n; i++)
			max_total += len_of(i);
		if (n * cap > rbuf.size() || max_total > sbuf.size()) {
			skip_part("ordering: buffers of %zu bytes are too small (max_msg_size %zu)",
				  rbuf.size(), max);
			return;
		}
		for (bool unexp : {false, true}) {
			std::string step = std::string("ordering, ") + (unexp ? "unexpected" : "expected");
			if (opts.client) {
				std::vector<fi_context2> ctx(n);
				if (!unexp)
					ctl.sync(step + " posted");
				size_t off = 0;
				for (int i = 0; i < n; i++) {
					fill_pattern(sbuf.data() + off, len_of(i), 900 + i);
					FT_POST(fi_tsend(ep, sbuf.data() + off, len_of(i), sbuf.desc(),
							  peer, T, &ctx[i]));
					off += len_of(i);
				}
				if (unexp) {
					if (sas)
						send_marker(ep, peer, marker_tag | 0x200);
					ctl.notify(step + " sent");
				}
				for (int i = 0; i < n; i++)
					ep.tx().wait(&ctx[i], step + " send " + std::to_string(i));
				ctl.sync(step + " checked");
				continue;
			}
			std::vector<fi_context2> ctx(n);
			auto post = [&]() {
				memset(rbuf.data(), canary, n * cap);
				for (int i = 0; i < n; i++)
					FT_POST(fi_trecv(ep, rbuf.data() + i * cap, cap - 64, rbuf.desc(),
							  FI_ADDR_UNSPEC, T, 0, &ctx[i]));
			};
			if (!unexp) {
				post();
				ctl.sync(step + " posted");
			} else {
				ctl.await(step + " sent");
				take_marker(ep, marker_tag | 0x200, peer, step);
				post();
			}
			for (int i = 0; i < n; i++) {
				Entry e = ep.rx().wait(&ctx[i], step + " receive " + std::to_string(i));
				FT_CHECK(e.len == len_of(i),
					 "%s: receive %d (posted %dth) got %zu bytes, but message %d has "
					 "%zu: messages matched out of send order",
					 step.c_str(), i, i + 1, e.len, i, len_of(i));
				std::string what = step + ", message " + std::to_string(i);
				FT_EXPECT_PATTERN(rbuf.data() + i * cap, e.len, 900 + i, 0, what.c_str());
				FT_EXPECT_BYTES(rbuf.data() + i * cap + e.len, cap - e.len, canary,
						(what + " after the data").c_str());
			}
			ctl.sync(step + " checked");
		}
		if (opts.server)
			note("ordering: %d messages with one tag (0 B .. 300 KiB) matched in send "
			     "order, expected and unexpected",
			     n);
	}
};

} // namespace

int main(int argc, char **argv)
{
	bool large = take_flag(argc, argv, "-L");
	parse_options(argc, argv,
		      "tagged messages of every size and call, ignore bits, directed receives, "
		      "ordering, truncation (-L: also 64 MiB)");
	Fabric fab(FI_TAGGED | FI_SEND | FI_RECV, FI_DIRECTED_RECV | FI_SOURCE);
	request_order(fab, FI_ORDER_SAS);
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */
	Endpoint ep(fab, ep_spec(fab));
	std::unique_ptr<Endpoint> ep_b;
	fi_addr_t peer = FI_ADDR_NOTAVAIL, peer_b = FI_ADDR_NOTAVAIL;
	if (opts.client) {
		ep_b = std::make_unique<Endpoint>(fab, ep_spec(fab));
		ctl.send_blob(ep.name());
		ctl.send_blob(ep_b->name());
		peer = fab.insert(ctl.recv_blob());
	} else {
		peer = fab.insert(ctl.recv_blob());
		peer_b = fab.insert(ctl.recv_blob());
		ctl.send_blob(ep.name());
	}

	std::vector<size_t> sizes{0,	 1,	63,    64,    4095,	4096,	   8191,
				  8192, 8193, 65535, 65536, 65537, 1u << 20, 4u << 20};
	/* The providers' own boundaries: the inject size and the link MTU (one packet), each
	 * +-1, and the read-based protocol's threshold (1 MiB, the efa default) -1. Both
	 * sides' (they may run different providers): each sends its own, takes the peer's. */
	const fi_info *fi = fab.info();
	const uint64_t own[2] = {fi->tx_attr->inject_size, fi->nic && fi->nic->link_attr ? fi->nic->link_attr->mtu : 0};
	ctl.put(own);
	const auto theirs = ctl.get<std::array<uint64_t, 2>>();
	for (uint64_t b : {own[0], own[1], theirs[0], theirs[1]})
		if (b > 1 && b < (1u << 30))
			sizes.insert(sizes.end(), {size_t(b) - 1, size_t(b), size_t(b) + 1});
	sizes.push_back((1u << 20) - 1);
	std::sort(sizes.begin(), sizes.end());
	sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
	if (large)
		sizes.push_back(64u << 20);
	else
		note("64 MiB messages only with -L");
	size_t limit = fab.max_msg_size();
	if (std::erase_if(sizes, [&](size_t s) { return s > limit; }))
		skip_part("sizes above max_msg_size %zu", limit);
	size_t max = std::max<size_t>(sizes.back(), 2u << 20);
	max = std::min(max, std::max<size_t>(limit, 1));

	bool unreg = !(fab.mr_mode() & FI_MR_LOCAL);
	if (!unreg)
		skip_part("unregistered buffers: mr_mode has FI_MR_LOCAL, so every buffer needs a "
			  "descriptor");
	if (!has_order(fab, FI_ORDER_SAS))
		skip_part("FI_ORDER_SAS is not advertised: the ordering part, and unexpected "
			  "messages are only ordered by the control channel (no marker)");
	if (fab.cq_data_size() == 0)
		skip_part("cq_data_size is 0: no remote CQ data");
	if (!fab.has(FI_SOURCE))
		skip_part("FI_SOURCE is not advertised: source addresses are not checked");

	Test t(fab, ctl, ep, ep_b.get(), peer, peer_b, max,
	       unreg ? std::min<size_t>(max, 4u << 20) + 5 * gap + 4096 : 0);
	t.part_sizes(sizes);
	note("part 1: %d messages of %zu sizes (0 B .. %s) verified", t.n_done, sizes.size(),
	     size_str(sizes.back()).c_str());
	int before = t.n_done;
	t.part_iovs();
	note("part 2: every iov count pair (%d x %d): %d messages verified", t.ntx, t.nrx,
	     t.n_done - before);
	t.part_ignore();
	t.part_two_peers(false);
	if (fab.has(FI_DIRECTED_RECV))
		t.part_two_peers(true);
	else
		skip_part("FI_DIRECTED_RECV is not advertised: directed receives");
	if (has_order(fab, FI_ORDER_SAS))
		t.part_order();
	t.part_reverse();
	note("server to client: verified");
	before = t.n_done;
	t.part_truncation();
	note("truncation: %d cases (FI_ETRUNC, len, olen, data) verified; %d cases in all",
	     t.n_done - before, t.n_done);
	ctl.sync("end");
	return 0;
}
