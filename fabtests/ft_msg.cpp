/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_msg: every send call against every receive call, at sizes 0, 1, inject_size,
 * inject_size + 1, 4096 and the largest message (8928 on EFA, clamped to max_msg_size).
 *
 * One message is in flight at a time: the receiver posts its receive and says so on the
 * control channel before the sender sends, so no case depends on unexpected-message
 * buffering or RNR retries, and none on ordering. Checked for each message:
 *   - the received bytes are the sender's pattern, and nothing after them changed
 *     (recvv: the data continues from the first iov into the second);
 *   - the receive completion: its context, len, FI_RECV|FI_MSG, and FI_REMOTE_CQ_DATA
 *     with the value for the *data calls and without it for the others;
 *   - the send completion: its context and FI_SEND|FI_MSG;
 *   - fi_inject / fi_injectdata: the buffer is overwritten as soon as the call returns
 *     (the receiver must still see the original bytes) and no completion ever appears.
 * Then the roles swap for fi_send / fi_recv, so both endpoints send.
 */
#include "common/ft_oob.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using namespace ft;

namespace {

enum SendOp { SEND, SENDV, SENDMSG, SENDMSG_DATA, SENDDATA, INJECT, INJECTDATA, N_SEND };
const char *const send_names[] = {
	"fi_send",     "fi_sendv",  "fi_sendmsg",   "fi_sendmsg(FI_REMOTE_CQ_DATA)",
	"fi_senddata", "fi_inject", "fi_injectdata"};
enum RecvOp { RECV, RECVV, RECVMSG, N_RECV };
const char *const recv_names[] = {"fi_recv", "fi_recvv", "fi_recvmsg"};

bool is_inject(int op) { return op == INJECT || op == INJECTDATA; }
bool has_data(int op) { return op == SENDMSG_DATA || op == SENDDATA || op == INJECTDATA; }

struct Case {
	int send_op;
	int recv_op;
	size_t len;
	uint32_t seed;
	std::string name;
};

struct Test {
	Fabric &fab;
	Oob &oob;
	Endpoint &ep;
	fi_addr_t peer;
	size_t max;	 /* largest message */
	Buffer a, b;	 /* message buffers; b is the second iov */

	Test(Fabric &f, Oob &o, Endpoint &e, fi_addr_t p, size_t m)
		: fab(f), oob(o), ep(e), peer(p), max(m), a(f, m), b(f, m) {}

	uint64_t data_of(const Case &c) const { return fab.cq_data(0x5eed0000u + c.seed); }

	void receive(const Case &c)
	{
		memset(a.data(), canary, max);
		memset(b.data(), canary, max);
		fi_context2 ctx{};
		size_t half = fab.rx_iov_limit() >= 2 ? max / 2 : max;
		std::vector<std::pair<uint8_t *, size_t>> parts{{a.data(), max}};
		if (c.recv_op == RECV) {
			FT_POST(fi_recv(ep, a.data(), max, a.desc(), FI_ADDR_UNSPEC, &ctx));
		} else if (c.recv_op == RECVV) {
			iovec iov[2] = {{a.data(), half}, {b.data(), max - half}};
			void *desc[2] = {a.desc(), b.desc()};
			size_t n = half < max ? 2 : 1;
			parts = {{a.data(), half}, {b.data(), max - half}};
			parts.resize(n);
			FT_POST(fi_recvv(ep, iov, desc, n, FI_ADDR_UNSPEC, &ctx));
		} else {
			iovec iov{a.data(), max};
			void *desc = a.desc();
			fi_msg msg{&iov, &desc, 1, FI_ADDR_UNSPEC, &ctx, 0};
			FT_POST(fi_recvmsg(ep, &msg, 0));
		}
		oob.sync(("posted " + c.name).c_str());

		Completion cc = ep.rx().wait(&ctx, c.name.c_str());
		FT_CHECK(cc.len == c.len, "%s: completion len %zu", c.name.c_str(), cc.len);
		FT_CHECK((cc.flags & (FI_RECV | FI_MSG)) == (FI_RECV | FI_MSG),
			 "%s: receive completion flags %s", c.name.c_str(),
			 flags_str(cc.flags).c_str());
		if (has_data(c.send_op)) {
			FT_CHECK(cc.flags & FI_REMOTE_CQ_DATA,
				 "%s: no FI_REMOTE_CQ_DATA in flags %s", c.name.c_str(),
				 flags_str(cc.flags).c_str());
			FT_CHECK(cc.data == data_of(c), "%s: data 0x%llx, expected 0x%llx",
				 c.name.c_str(), (unsigned long long)cc.data,
				 (unsigned long long)data_of(c));
		} else {
			FT_CHECK(!(cc.flags & FI_REMOTE_CQ_DATA),
				 "%s: FI_REMOTE_CQ_DATA without data", c.name.c_str());
		}
		/* The data, then untouched bytes, across the receive's iovs. */
		size_t done = 0;
		for (auto [p, n] : parts) {
			size_t got = std::min(n, c.len - done);
			FT_EXPECT_PATTERN(p, got, c.seed, done, c.name.c_str());
			FT_EXPECT_BYTES(p + got, n - got, canary,
					(c.name + " (after the data)").c_str());
			done += got;
		}
		oob.sync(("checked " + c.name).c_str());
	}

	void send(const Case &c)
	{
		const size_t n = c.len;
		/* fi_sendv: the first half from a, the rest from b (one iov if it cannot split). */
		size_t h = (c.send_op == SENDV && fab.tx_iov_limit() >= 2 && n >= 2) ? n / 2 : n;
		fill_pattern(a.data(), h, c.seed, 0);
		fill_pattern(b.data(), n - h, c.seed, h);
		oob.sync(("posted " + c.name).c_str());

		fi_context2 ctx{};
		iovec iov[2] = {{a.data(), h}, {b.data(), n - h}};
		void *desc[2] = {a.desc(), b.desc()};
		fi_msg msg{iov, desc, 1, peer, &ctx, data_of(c)};
		switch (c.send_op) {
		case SEND: FT_POST(fi_send(ep, a.data(), n, a.desc(), peer, &ctx)); break;
		case SENDV: FT_POST(fi_sendv(ep, iov, desc, h < n ? 2 : 1, peer, &ctx)); break;
		case SENDMSG: FT_POST(fi_sendmsg(ep, &msg, 0)); break;
		case SENDMSG_DATA: FT_POST(fi_sendmsg(ep, &msg, FI_REMOTE_CQ_DATA)); break;
		case SENDDATA:
			FT_POST(fi_senddata(ep, a.data(), n, a.desc(), data_of(c), peer, &ctx));
			break;
		case INJECT: FT_POST(fi_inject(ep, a.data(), n, peer)); break;
		case INJECTDATA: FT_POST(fi_injectdata(ep, a.data(), n, data_of(c), peer)); break;
		}
		if (is_inject(c.send_op)) {
			/* The buffer is the application's again once the call returns. */
			memset(a.data(), 0, n);
		} else {
			Completion cc = ep.tx().wait(&ctx, c.name.c_str());
			FT_CHECK((cc.flags & (FI_SEND | FI_MSG)) == (FI_SEND | FI_MSG),
				 "%s: send completion flags %s", c.name.c_str(),
				 flags_str(cc.flags).c_str());
		}
		oob.sync(("checked " + c.name).c_str());
		if (is_inject(c.send_op))
			ep.tx().expect_empty((c.name + " generates no completion").c_str());
	}
};

std::vector<Case> cases(const Fabric &fab, size_t max, bool all_ops)
{
	std::vector<size_t> sizes{0, 1, fab.inject_size(), fab.inject_size() + 1, 4096, max};
	std::erase_if(sizes, [&](size_t s) { return s > max; });
	std::sort(sizes.begin(), sizes.end());
	sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());

	std::vector<Case> out;
	int k = 0;
	for (size_t len : sizes) {
		for (int op = 0; op < (all_ops ? int(N_SEND) : 1); op++) {
			if (is_inject(op) && len > fab.inject_size())
				continue;
			if (has_data(op) && fab.cq_data_size() == 0)
				continue;
			int rop = all_ops ? k % N_RECV : RECV;
			uint32_t seed = uint32_t(1000 + out.size()) + (all_ops ? 0 : 5000);
			std::string name = std::string(send_names[op]) + " -> " + recv_names[rop] +
					   ", " + std::to_string(len) + " bytes";
			out.push_back({op, rop, len, seed, name});
			k++;
		}
	}
	return out;
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "every send and receive call at the interesting sizes");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV);
	Oob oob;
	Endpoint ep(fab);
	fi_addr_t peer = oob.exchange_names(fab, ep);
	size_t max = std::min<size_t>(8928, fab.max_msg_size());
	if (fab.cq_data_size() == 0)
		note("cq_data_size is 0: the *data calls are not tested");
	{
		Test t(fab, oob, ep, peer, max);
		/* The client sends with every call; then the server sends with fi_send. */
		auto all = cases(fab, max, true);
		for (const Case &c : all)
			opts.client ? t.send(c) : t.receive(c);
		auto back = cases(fab, max, false);
		for (const Case &c : back)
			opts.server ? t.send(c) : t.receive(c);
		note("%zu messages client -> server and %zu server -> client verified", all.size(),
		     back.size());
	}
	oob.sync("end");
	return 0;
}
