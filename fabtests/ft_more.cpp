/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_more: batches posted with FI_MORE (every operation of a batch but the last carries
 * it, telling the provider more are coming; the last one rings the doorbell).
 *
 *   - sends: the server posts one receive per message; the client posts eight
 *     fi_sendmsg(FI_MORE) of distinct sizes, the last without FI_MORE. Messages may
 *     arrive in any order, so each is identified by its length and checked by content;
 *     each must arrive exactly once, and each send completes with its own context.
 *   - writes (with FI_RMA): eight fi_writemsg(FI_MORE) to distinct ranges of a server
 *     region, then eight fi_readmsg(FI_MORE) of other ranges; every range is checked.
 */
#include "common/ft_oob.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using namespace ft;

namespace {

constexpr size_t batch = 8;
constexpr uint32_t region_seed = 99;

/* Distinct sizes, so the receiver tells the messages apart by length. */
std::vector<size_t> message_sizes(const Fabric &fab, size_t max)
{
	std::vector<size_t> s{1, 2, 31, fab.inject_size() + 3, 1000, 4096, 5000, max};
	for (size_t i = 0; i < s.size(); i++) /* keep them distinct under a small max */
		s[i] = std::min(s[i], max - (s.size() - 1 - i));
	std::sort(s.begin(), s.end());
	FT_CHECK(std::unique(s.begin(), s.end()) == s.end(), "max_msg_size %zu is too small", max);
	return s;
}

void messages(const Fabric &fab, Oob &oob, Endpoint &ep, fi_addr_t peer)
{
	const size_t max = std::min<size_t>(8928, fab.max_msg_size());
	const std::vector<size_t> sizes = message_sizes(fab, max);
	fi_context2 ctx[batch]{};
	std::vector<std::unique_ptr<Buffer>> bufs;
	for (size_t i = 0; i < batch; i++)
		bufs.push_back(std::make_unique<Buffer>(fab, max));

	if (opts.server) {
		for (size_t i = 0; i < batch; i++)
			FT_POST(fi_recv(ep, bufs[i]->data(), max, bufs[i]->desc(), FI_ADDR_UNSPEC,
					&ctx[i]));
		oob.sync("receives posted");
		bool seen[batch] = {};
		for (size_t i = 0; i < batch; i++) {
			Completion c = ep.rx().wait(&ctx[i], "a receive of the FI_MORE batch");
			auto it = std::find(sizes.begin(), sizes.end(), c.len);
			FT_CHECK(it != sizes.end(), "a message of %zu bytes, not one of the batch",
				 c.len);
			size_t id = size_t(it - sizes.begin());
			FT_CHECK(!seen[id], "message %zu (%zu bytes) arrived twice", id, c.len);
			seen[id] = true;
			std::string what = "FI_MORE message " + std::to_string(id);
			FT_EXPECT_PATTERN(bufs[i]->data(), c.len, uint32_t(300 + id), 0,
					  what.c_str());
			FT_EXPECT_BYTES(bufs[i]->data() + c.len, max - c.len, canary, what.c_str());
		}
		oob.sync("batch received");
		note("%zu messages sent with FI_MORE arrived once each", batch);
		return;
	}
	for (size_t i = 0; i < batch; i++)
		fill_pattern(bufs[i]->data(), sizes[i], uint32_t(300 + i));
	oob.sync("receives posted");
	for (size_t i = 0; i < batch; i++) {
		iovec iov{bufs[i]->data(), sizes[i]};
		void *desc = bufs[i]->desc();
		fi_msg msg{&iov, &desc, 1, peer, &ctx[i], 0};
		FT_POST(fi_sendmsg(ep, &msg, i + 1 < batch ? FI_MORE : 0));
	}
	for (size_t i = 0; i < batch; i++)
		ep.tx().wait(&ctx[i], ("FI_MORE send " + std::to_string(i)).c_str());
	oob.sync("batch received");
}

/* Range i of the region: disjoint, unaligned, growing sizes up to 60001 bytes. */
constexpr size_t range_off(size_t i) { return i * 70001 + 5; }
constexpr size_t range_len(size_t i) { return 1 + i * 4000; }
constexpr size_t region = range_off(2 * batch - 1) + range_len(2 * batch - 1);

void rma(const Fabric &fab, Oob &oob, Endpoint &ep, fi_addr_t peer)
{
	if (opts.server) {
		Buffer r(fab, region, fab.local_access() | FI_REMOTE_READ | FI_REMOTE_WRITE);
		fill_pattern(r.data(), region, region_seed);
		oob.send_mr(r);
		oob.sync("writes done");
		for (size_t i = 0; i < batch; i++) {
			std::string what = "FI_MORE write " + std::to_string(i);
			FT_AWAIT_PATTERN(r.data() + range_off(i), range_len(i), uint32_t(400 + i),
					 0, what.c_str());
		}
		oob.sync("reads done");
		note("%zu writes and %zu reads posted with FI_MORE verified", batch, batch);
		return;
	}
	RemoteMr r = oob.recv_mr();
	Buffer local(fab, region);
	fi_context2 ctx[2 * batch]{};
	fi_rma_iov riov[2 * batch];
	iovec iov[2 * batch];
	void *desc[2 * batch];
	for (size_t i = 0; i < 2 * batch; i++) {
		/* writes: ranges 0..7 from the same offsets locally; reads: ranges 8..15 */
		riov[i] = {r.at(range_off(i)), range_len(i), r.key};
		iov[i] = {local.data() + range_off(i), range_len(i)};
		desc[i] = local.desc();
		if (i < batch)
			fill_pattern(iov[i].iov_base, range_len(i), uint32_t(400 + i));
	}
	for (size_t i = 0; i < batch; i++) {
		fi_msg_rma msg{&iov[i], &desc[i], 1, peer, &riov[i], 1, &ctx[i], 0};
		FT_POST(fi_writemsg(ep, &msg, i + 1 < batch ? FI_MORE : 0));
	}
	for (size_t i = 0; i < batch; i++)
		ep.tx().wait(&ctx[i], ("FI_MORE write " + std::to_string(i)).c_str());
	oob.sync("writes done");
	for (size_t i = batch; i < 2 * batch; i++) {
		fi_msg_rma msg{&iov[i], &desc[i], 1, peer, &riov[i], 1, &ctx[i], 0};
		FT_POST(fi_readmsg(ep, &msg, i + 1 < 2 * batch ? FI_MORE : 0));
	}
	for (size_t i = batch; i < 2 * batch; i++) {
		std::string what = "FI_MORE read " + std::to_string(i);
		ep.tx().wait(&ctx[i], what.c_str());
		FT_EXPECT_PATTERN(iov[i].iov_base, range_len(i), region_seed, range_off(i),
				  what.c_str());
	}
	oob.sync("reads done");
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "batches of sends, writes and reads posted with FI_MORE");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV, FI_RMA);
	Oob oob;
	Endpoint ep(fab);
	fi_addr_t peer = oob.exchange_names(fab, ep);
	messages(fab, oob, ep, peer);
	if (fab.has(FI_RMA) && range_len(2 * batch - 1) <= fab.max_msg_size())
		rma(fab, oob, ep, peer);
	oob.sync("end");
	return 0;
}
