/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_selective: a transmit CQ bound with FI_SELECTIVE_COMPLETION. Operations posted
 * with FI_COMPLETION produce an entry; those without produce none; calls without a
 * flags argument (fi_send, fi_write) follow the endpoint's tx op_flags (an entry only
 * when they include FI_COMPLETION); fi_inject never produces one.
 *
 * The client sends five messages of distinct sizes (fi_send, fi_sendmsg(0),
 * fi_sendmsg(FI_COMPLETION), fi_inject, and after the server has all four, a last
 * fi_sendmsg(FI_COMPLETION)); the server checks each arrives. The client waits for the
 * entries it expects, and once the last one is in, its CQ must hold nothing else. With
 * FI_RMA the same for fi_writemsg(0), fi_writemsg(FI_COMPLETION) and fi_write.
 */
#include "common/ft_oob.h"

#include <algorithm>
#include <cstring>
#include <string>

using namespace ft;

namespace {

constexpr size_t n_msgs = 5;
size_t msg_len(size_t i) { return 4 + 6 * i; } /* 4 .. 28: within EFA's inject_size 32 */

void messages(const Fabric &fab, Oob &oob, Endpoint &ep, fi_addr_t peer, bool plain_completes)
{
	Buffer buf(fab, 4096);
	fi_context2 ctx[n_msgs]{};
	if (opts.server) {
		for (size_t i = 0; i < n_msgs; i++)
			FT_POST(fi_recv(ep, buf.data() + 512 * i, 512, buf.desc(), FI_ADDR_UNSPEC,
					&ctx[i]));
		oob.sync("receives posted");
		bool seen[n_msgs] = {};
		for (size_t i = 0; i < n_msgs; i++) {
			if (i == n_msgs - 1)
				oob.sync("four received");
			Completion c = ep.rx().wait(&ctx[i], "a receive");
			size_t id = (c.len - 4) / 6;
			FT_CHECK(c.len >= 4 && (c.len - 4) % 6 == 0 && id < n_msgs && !seen[id],
				 "unexpected message of %zu bytes", c.len);
			seen[id] = true;
			FT_EXPECT_PATTERN(buf.data() + 512 * i, c.len, uint32_t(500 + id), 0,
					  "a message");
		}
		oob.sync("all received");
		return;
	}
	for (size_t i = 0; i < n_msgs; i++)
		fill_pattern(buf.data() + 512 * i, msg_len(i), uint32_t(500 + i));
	iovec iov[n_msgs];
	void *desc[n_msgs];
	fi_msg msg[n_msgs];
	for (size_t i = 0; i < n_msgs; i++) {
		iov[i] = {buf.data() + 512 * i, msg_len(i)};
		desc[i] = buf.desc();
		msg[i] = {&iov[i], &desc[i], 1, peer, &ctx[i], 0};
	}
	oob.sync("receives posted");
	FT_POST(fi_send(ep, iov[0].iov_base, msg_len(0), buf.desc(), peer, &ctx[0]));
	FT_POST(fi_sendmsg(ep, &msg[1], 0));
	FT_POST(fi_sendmsg(ep, &msg[2], FI_COMPLETION));
	if (fab.inject_size() >= msg_len(3))
		FT_POST(fi_inject(ep, iov[3].iov_base, msg_len(3), peer));
	else
		FT_POST(fi_sendmsg(ep, &msg[3], 0));
	ep.tx().wait(&ctx[2], "fi_sendmsg(FI_COMPLETION)");
	if (plain_completes)
		ep.tx().wait(&ctx[0], "fi_send (tx op_flags has FI_COMPLETION)");
	oob.sync("four received");
	FT_POST(fi_sendmsg(ep, &msg[4], FI_COMPLETION));
	ep.tx().wait(&ctx[4], "the last fi_sendmsg(FI_COMPLETION)");
	oob.sync("all received");
	ep.tx().expect_empty("fi_send, fi_sendmsg(0) and fi_inject generate no entry");
}

void rma(const Fabric &fab, Oob &oob, Endpoint &ep, fi_addr_t peer, bool plain_completes)
{
	const size_t len = 3000;
	if (opts.server) {
		Buffer r(fab, 3 * len, fab.local_access() | FI_REMOTE_WRITE);
		oob.send_mr(r);
		oob.sync("writes posted");
		for (size_t i = 0; i < 3; i++)
			FT_AWAIT_PATTERN(r.data() + i * len, len, uint32_t(600 + i), 0,
					 ("write " + std::to_string(i)).c_str());
		oob.sync("writes checked");
		return;
	}
	RemoteMr r = oob.recv_mr();
	Buffer local(fab, 3 * len);
	fi_context2 ctx[3]{};
	iovec iov[3];
	void *desc[3];
	fi_rma_iov riov[3];
	for (size_t i = 0; i < 3; i++) {
		fill_pattern(local.data() + i * len, len, uint32_t(600 + i));
		iov[i] = {local.data() + i * len, len};
		desc[i] = local.desc();
		riov[i] = {r.at(i * len), len, r.key};
	}
	fi_msg_rma m0{&iov[0], &desc[0], 1, peer, &riov[0], 1, &ctx[0], 0};
	fi_msg_rma m1{&iov[1], &desc[1], 1, peer, &riov[1], 1, &ctx[1], 0};
	FT_POST(fi_writemsg(ep, &m0, 0));
	FT_POST(fi_writemsg(ep, &m1, FI_COMPLETION));
	FT_POST(fi_write(ep, iov[2].iov_base, len, local.desc(), peer, riov[2].addr, r.key,
			 &ctx[2]));
	ep.tx().wait(&ctx[1], "fi_writemsg(FI_COMPLETION)");
	if (plain_completes)
		ep.tx().wait(&ctx[2], "fi_write (tx op_flags has FI_COMPLETION)");
	oob.sync("writes posted");
	oob.sync("writes checked");
	ep.tx().expect_empty("fi_writemsg(0) and fi_write generate no entry");
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "FI_SELECTIVE_COMPLETION on the transmit CQ");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV, FI_RMA);
	if (fab.inject_size() < msg_len(3))
		note("inject_size %zu is below %zu: fi_inject is replaced by fi_sendmsg(0)",
		     fab.inject_size(), msg_len(3));
	Oob oob;
	CqSpec tx;
	tx.bind_flags = FI_SELECTIVE_COMPLETION;
	Endpoint ep(fab, opts.client ? tx : CqSpec{});
	fi_addr_t peer = oob.exchange_names(fab, ep);
	/* fi_send / fi_write take the endpoint's default flags. */
	bool plain = fab.info()->tx_attr->op_flags & FI_COMPLETION;
	if (opts.client)
		note("tx op_flags %s FI_COMPLETION: fi_send and fi_write %s an entry",
		     plain ? "include" : "lack", plain ? "must produce" : "must not produce");
	messages(fab, oob, ep, peer, plain);
	if (fab.has(FI_RMA))
		rma(fab, oob, ep, peer, plain);
	oob.sync("end");
	return 0;
}
