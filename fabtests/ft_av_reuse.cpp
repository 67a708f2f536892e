/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_av_reuse: a peer replaces its endpoint, and the AV entry with it.
 *
 *   1. A message reaches the server's first endpoint. The client checks fi_av_lookup of
 *      the server's fi_addr_t (the bytes and length it inserted) and fi_av_straddr.
 *   2. The server closes that endpoint, opens a new one on the same domain and AV, and
 *      sends its name. The client fi_av_remove()s the old address, inserts the new one
 *      (fi_av_lookup again), and messages flow both ways with the new endpoint.
 *   3. EFA only: before removing the old address the client sends a message to it
 *      and waits for that send's completion, successful or not (with EFASIM_MAX_QP=2
 *      the new endpoint has the old one's QP number, with a new QKEY). The stale
 *      message must never reach the new endpoint: the server has a spare receive
 *      posted, and only the message sent to the new address may complete a receive.
 *      With EFA_FT_EXPECT_QPN_REUSE=1 the client checks that the new endpoint really
 *      has the old QP number and another QKEY (from the FI_ADDR_EFA text form
 *      "fi_addr_efa://[GID]:QPN:QKEY"), so the case cannot pass untested.
 * The AV type comes from -A (table or map).
 */
#include "common/ft_oob.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace ft;

namespace {

constexpr size_t len = 300;

void check_lookup(const Fabric &fab, fi_addr_t addr, const std::vector<uint8_t> &name)
{
	std::vector<uint8_t> got(name.size() + 16);
	size_t got_len = got.size();
	FT_CALL(fi_av_lookup(fab.av(), addr, got.data(), &got_len));
	FT_CHECK(got_len == name.size(), "fi_av_lookup gave %zu bytes, %zu were inserted", got_len,
		 name.size());
	FT_CHECK(!memcmp(got.data(), name.data(), name.size()),
		 "fi_av_lookup gave other bytes than were inserted");
	char str[256];
	size_t str_len = sizeof str;
	const char *s = fi_av_straddr(fab.av(), name.data(), str, &str_len);
	FT_CHECK(s && s[0] && str_len > 1, "fi_av_straddr gave nothing");
	note("peer address %s", s);
}

/* The QP number and QKEY of an FI_ADDR_EFA name, from fi_av_straddr's text form. */
bool qpn_qkey(const Fabric &fab, const std::vector<uint8_t> &name, unsigned long &qpn, unsigned long &qkey)
{
	char str[256];
	size_t str_len = sizeof str;
	const char *s = fi_av_straddr(fab.av(), name.data(), str, &str_len);
	const char *end = s ? strrchr(s, ']') : nullptr;
	return end && sscanf(end, "]:%lu:%lu", &qpn, &qkey) == 2;
}

void server(const Fabric &fab, Oob &oob)
{
	auto ep = std::make_unique<Endpoint>(fab);
	fi_addr_t client_addr = oob.exchange_names(fab, *ep);
	Buffer buf(fab, 2 * len);
	fi_context2 ctx[3]{};
	FT_POST(fi_recv(*ep, buf.data(), len, buf.desc(), FI_ADDR_UNSPEC, &ctx[0]));
	oob.sync("first posted");
	ep->rx().wait(&ctx[0], "the message to the first endpoint");
	FT_EXPECT_PATTERN(buf.data(), len, 1300, 0, "the message to the first endpoint");
	/* Not before the client's send completed: its acknowledgement may still be on the
	 * way (or lost and due again), and closing would fail a delivered send. */
	oob.sync("first sent");

	ep.reset(); /* close the endpoint and its CQs; open another on the same AV */
	ep = std::make_unique<Endpoint>(fab);
	oob.send_blob(ep->name());
	FT_POST(fi_recv(*ep, buf.data(), len, buf.desc(), FI_ADDR_UNSPEC, &ctx[1]));
	FT_POST(fi_recv(*ep, buf.data() + len, len, buf.desc(), FI_ADDR_UNSPEC, &ctx[2]));
	oob.sync("second posted");
	Completion c = ep->rx().wait(&ctx[1], "a message to the new endpoint");
	FT_CHECK(c.len == len, "a message of %zu bytes reached the new endpoint", c.len);
	FT_EXPECT_PATTERN(buf.data(), len, 1302, 0,
			  "the first message at the new endpoint (must be the one sent to it)");
	oob.sync("second received");
	/* The client is done sending to us; the spare receive must still be posted. */
	ep->rx().expect_empty("no other message reaches the new endpoint");

	/* And the new endpoint sends to the client, whose address did not change. */
	fill_pattern(buf.data(), len, 1303);
	FT_POST(fi_send(*ep, buf.data(), len, buf.desc(), client_addr, &ctx[0]));
	ep->tx().wait(&ctx[0], "the new endpoint's send");
	oob.sync("reply received");
}

void client(const Fabric &fab, Oob &oob)
{
	Endpoint ep(fab);
	fi_addr_t old_addr = oob.exchange_names(fab, ep);
	std::vector<uint8_t> old_name = oob.peer_name();
	Buffer buf(fab, len);
	fi_context2 ctx[3]{};
	fill_pattern(buf.data(), len, 1300);
	oob.sync("first posted");
	FT_POST(fi_send(ep, buf.data(), len, buf.desc(), old_addr, &ctx[0]));
	ep.tx().wait(&ctx[0], "the message to the first endpoint");
	oob.sync("first sent");
	check_lookup(fab, old_addr, old_name);

	std::vector<uint8_t> new_name = oob.recv_blob();
	if (new_name == old_name)
		note("the new endpoint has the old one's name");
	const char *reuse = getenv("EFA_FT_EXPECT_QPN_REUSE");
	if (reuse && !strcmp(reuse, "1")) {
		unsigned long old_qpn, old_qkey, new_qpn, new_qkey;
		FT_CHECK(qpn_qkey(fab, old_name, old_qpn, old_qkey) && qpn_qkey(fab, new_name, new_qpn, new_qkey),
			 "EFA_FT_EXPECT_QPN_REUSE: the names are not FI_ADDR_EFA addresses");
		FT_CHECK(new_qpn == old_qpn,
			 "the new endpoint has QP number %lu, the closed one had %lu: the QP number was not "
			 "reused, so the stale-address case was not tested",
			 new_qpn, old_qpn);
		FT_CHECK(new_qkey != old_qkey, "QP %lu reused with the same QKEY %lu", new_qpn, new_qkey);
		note("the new endpoint reuses QP number %lu, QKEY %lu instead of %lu", new_qpn, new_qkey, old_qkey);
	}
	oob.sync("second posted");
	if (fab.is_efa()) {
		fill_pattern(buf.data(), len, 1301);
		FT_POST(fi_send(ep, buf.data(), len, buf.desc(), old_addr, &ctx[1]));
		Completion c = ep.tx().wait_any(&ctx[1], "a send to the stale address");
		note("send to the closed endpoint's address: %s",
		     c.error ? c.describe().c_str() : "completed without error");
	}
	fab.remove(old_addr);
	fi_addr_t new_addr = fab.insert(new_name);
	check_lookup(fab, new_addr, new_name);
	fill_pattern(buf.data(), len, 1302);
	FT_POST(fi_send(ep, buf.data(), len, buf.desc(), new_addr, &ctx[2]));
	ep.tx().wait(&ctx[2], "the message to the new endpoint");
	/* Posted before the server may send: no reliance on unexpected-message buffering. */
	FT_POST(fi_recv(ep, buf.data(), len, buf.desc(), FI_ADDR_UNSPEC, &ctx[0]));
	oob.sync("second received");
	ep.rx().wait(&ctx[0], "the new endpoint's message");
	FT_EXPECT_PATTERN(buf.data(), len, 1303, 0, "the new endpoint's message");
	oob.sync("reply received");
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "fi_av_remove of a replaced endpoint, then reuse");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV);
	Oob oob;
	if (opts.server)
		server(fab, oob);
	else
		client(fab, oob);
	if (!fab.is_efa() && opts.client)
		note("the stale-address check is EFA-specific: not run on %s", fab.prov_name());
	oob.sync("end");
	return 0;
}
