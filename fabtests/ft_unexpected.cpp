/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_unexpected: thousands of messages arrive before any receive is posted.
 *
 * The client sends 3000 messages back to back, without waiting for any completion:
 * tagged (fi_tsend, every 7th fi_tsenddata) with one of 8 tags, and untagged (fi_send,
 * every 7th fi_senddata), of three size classes: eager (0 .. 2 KiB), medium (about
 * 32 KiB, every 20th) and long (about 1 MiB, every 200th). Then, with FI_ORDER_SAS, a
 * marker message; the server, which has posted nothing, receives the marker first: by
 * send-after-send ordering all 3000 messages have then been taken in as unexpected. Only
 * then does it post a receive for every message, in another order than they were sent:
 * tag 7 down to 0, the untagged ones in between, each tag's receives in its send order.
 *
 * Checked for each message: it lands in the receive for its place in its tag's (or the
 * untagged) send order (FI_ORDER_SAS; each receive is sized for its message plus 64
 * bytes, so a message taken out of order shows by its length or its bytes); every byte,
 * and the 64 bytes after it untouched; len, tag, flags (FI_RECV with FI_TAGGED or
 * FI_MSG, FI_REMOTE_CQ_DATA exactly with data) and data; the source with FI_SOURCE;
 * every send completes, with FI_SEND and FI_TAGGED or FI_MSG.
 */
#include "common/ft_rdm.h"

#include <cstring>
#include <string>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

constexpr int n_msgs = 3000;
constexpr int n_tags = 8;
constexpr int untagged = -1;
constexpr size_t slack = 64;
constexpr uint64_t tag_base = 0x7a90000000000000ull;
constexpr uint64_t marker = 0x4d41524b0000ffffull;

struct Msg {
	int tag;     /* 0..7, or untagged */
	size_t len;
	bool data;
	size_t soff; /* offset in the sender's buffer */
	size_t roff; /* offset in the receiver's buffer */
	uint32_t seed;
};

std::vector<Msg> schedule(size_t max)
{
	std::vector<Msg> m(n_msgs);
	size_t soff = 0;
	for (int i = 0; i < n_msgs; i++) {
		Msg &x = m[size_t(i)];
		/* Mostly tagged; one in 5 untagged. */
		x.tag = i % 5 == 2 ? untagged : int((i * 7 + i / 13) % n_tags);
		if (i % 200 == 199)
			x.len = (1u << 20) + size_t(i);
		else if (i % 20 == 9)
			x.len = 32 * 1024 + size_t(i % 100);
		else
			x.len = size_t(i) * 131 % 2049;
		x.len = std::min(x.len, max);
		x.data = i % 7 == 3;
		x.seed = uint32_t(20000 + i);
		x.soff = soff;
		soff += x.len;
	}
	return m;
}

const char *kind(const Msg &m) { return m.tag == untagged ? "untagged" : "tagged"; }

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv,
		      "3000 tagged and untagged messages (0 B .. 1 MiB) before any receive is "
		      "posted, received in another order");
	Fabric fab(FI_TAGGED | FI_MSG | FI_SEND | FI_RECV, FI_SOURCE);
	request_order(fab, FI_ORDER_SAS);
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */
	Endpoint ep(fab, ep_spec(fab));
	fi_addr_t peer = ctl.exchange_names(fab, ep);
	const bool src = fab.has(FI_SOURCE);
	const bool sas = has_order(fab, FI_ORDER_SAS);
	const bool cq_data = fab.cq_data_size() > 0;
	if (!sas)
		skip_part("FI_ORDER_SAS is not advertised: no per-tag order check, and the "
			  "messages are only known to have been sent (control channel) before the "
			  "receives are posted");
	if (!src)
		skip_part("FI_SOURCE is not advertised: source addresses are not checked");
	if (!cq_data)
		skip_part("cq_data_size is 0: no remote CQ data");

	std::vector<Msg> msgs = schedule(fab.max_msg_size());
	size_t total = 0, n_long = 0, n_medium = 0, n_untagged = 0;
	for (auto &m : msgs) {
		total += m.len;
		n_long += m.len > 512 * 1024;
		n_medium += m.len >= 32 * 1024 && m.len < 512 * 1024;
		n_untagged += m.tag == untagged;
	}
	auto data_of = [&](const Msg &m) { return fab.cq_data(0xd0d0000000000000ull | m.seed); };

	if (opts.client) {
		Buffer sbuf(fab, total + 4096);
		for (auto &m : msgs)
			fill_pattern(sbuf.data() + m.soff, m.len, m.seed);
		std::vector<fi_context2> ctx(msgs.size());
		ctl.sync("nothing posted");
		for (size_t i = 0; i < msgs.size(); i++) {
			const Msg &m = msgs[i];
			uint8_t *p = sbuf.data() + m.soff;
			bool d = m.data && cq_data;
			if (m.tag == untagged) {
				if (d)
					FT_POST(fi_senddata(ep, p, m.len, sbuf.desc(), data_of(m), peer,
							     &ctx[i]));
				else
					FT_POST(fi_send(ep, p, m.len, sbuf.desc(), peer, &ctx[i]));
			} else {
				uint64_t tag = tag_base + uint64_t(m.tag);
				if (d)
					FT_POST(fi_tsenddata(ep, p, m.len, sbuf.desc(), data_of(m), peer,
							      tag, &ctx[i]));
				else
					FT_POST(fi_tsend(ep, p, m.len, sbuf.desc(), peer, tag, &ctx[i]));
			}
		}
		if (sas) {
			fi_context2 mctx{};
			FT_POST(fi_tsend(ep, nullptr, 0, nullptr, peer, marker, &mctx));
			ctl.notify("all sent");
			ep.tx().wait(&mctx, "the marker");
		} else {
			ctl.notify("all sent");
		}
		for (size_t i = 0; i < msgs.size(); i++) {
			Entry e = ep.tx().wait(&ctx[i], "send " + std::to_string(i));
			expect_flags(e, FI_SEND | (msgs[i].tag == untagged ? FI_MSG : FI_TAGGED), FI_RECV,
				     "send " + std::to_string(i));
		}
		ctl.sync("checked");
		note("%d sends completed", n_msgs);
		return 0;
	}

	/* server */
	size_t roff = 0;
	for (auto &m : msgs) {
		m.roff = roff;
		roff += m.len + slack;
	}
	Buffer rbuf(fab, roff + 4096);
	std::vector<fi_context2> ctx(msgs.size());
	ctl.sync("nothing posted");
	ctl.await("all sent");
	if (sas) {
		fi_context2 mctx{};
		uint8_t none[8];
		FT_POST(fi_trecv(ep, none, 0, nullptr, FI_ADDR_UNSPEC, marker, 0, &mctx));
		Entry e = ep.rx().wait(&mctx, "the marker after the 3000 messages");
		FT_CHECK(e.len == 0 && e.tag == marker, "marker entry: %s", e.describe().c_str());
	}
	ep.rx().expect_empty("nothing was posted but the marker's receive");

	/* Post: tags 7..4, the untagged ones, tags 3..0; each in send order. */
	std::vector<int> order;
	for (int t = n_tags - 1; t >= 4; t--)
		order.push_back(t);
	order.push_back(untagged);
	for (int t = 3; t >= 0; t--)
		order.push_back(t);
	int posted = 0;
	for (int t : order) {
		for (size_t i = 0; i < msgs.size(); i++) {
			const Msg &m = msgs[i];
			if (m.tag != t)
				continue;
			uint8_t *p = rbuf.data() + m.roff;
			if (t == untagged)
				FT_POST(fi_recv(ep, p, m.len + slack, rbuf.desc(), FI_ADDR_UNSPEC,
						 &ctx[i]));
			else
				FT_POST(fi_trecv(ep, p, m.len + slack, rbuf.desc(), FI_ADDR_UNSPEC,
						  tag_base + uint64_t(t), 0, &ctx[i]));
			posted++;
		}
	}
	FT_CHECK(posted == n_msgs, "posted %d receives", posted);

	for (size_t i = 0; i < msgs.size(); i++) {
		const Msg &m = msgs[i];
		std::string what = std::string(kind(m)) + " message " + std::to_string(i) + " (" +
				   size_str(m.len) +
				   (m.tag == untagged ? std::string("")
						      : ", tag " + std::to_string(m.tag)) +
				   ")";
		Entry e = ep.rx().wait(&ctx[i], what);
		FT_CHECK(e.len == m.len,
			 "%s: its receive got %zu bytes: another message%s was matched to it",
			 what.c_str(), e.len, sas ? " (out of send order)" : "");
		bool d = m.data && cq_data;
		expect_flags(e, FI_RECV | (m.tag == untagged ? FI_MSG : FI_TAGGED) |
					(d ? FI_REMOTE_CQ_DATA : 0),
			     FI_SEND | (m.tag == untagged ? FI_TAGGED : 0) | (d ? 0 : FI_REMOTE_CQ_DATA),
			     what);
		if (m.tag != untagged)
			FT_CHECK(e.tag == tag_base + uint64_t(m.tag), "%s: tag 0x%llx", what.c_str(),
				 (unsigned long long)e.tag);
		if (d)
			FT_CHECK(e.data == data_of(m), "%s: data 0x%llx, expected 0x%llx",
				 what.c_str(), (unsigned long long)e.data,
				 (unsigned long long)data_of(m));
		if (src)
			FT_CHECK(e.src == peer, "%s: source %llu, expected %llu", what.c_str(),
				 (unsigned long long)e.src, (unsigned long long)peer);
		FT_EXPECT_PATTERN(rbuf.data() + m.roff, m.len, m.seed, 0, what.c_str());
		FT_EXPECT_BYTES(rbuf.data() + m.roff + m.len, slack, canary,
				(what + ": after the data").c_str());
	}
	ctl.sync("checked");
	note("%d unexpected messages (%zu untagged, %zu medium, %zu long; %s in all) received in "
	     "tag order 7..4, untagged, 3..0 and verified",
	     n_msgs, n_untagged, n_medium, n_long, size_str(total).c_str());
	return 0;
}
