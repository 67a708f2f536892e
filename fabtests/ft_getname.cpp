/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_getname: the endpoint's name and options, on both sides.
 *   - fi_getname with a 0-byte and a (needed - 1)-byte buffer returns -FI_ETOOSMALL and
 *     sets the length to the size needed, without writing past the given length; with
 *     that size it succeeds and gives the same length; FI_ADDR_EFA names are 32 bytes;
 *   - fi_setopt and fi_getopt with an unknown option name return -FI_ENOPROTOOPT;
 *   - the name works: inserted by the peer, it receives a message there and back, and
 *     fi_av_lookup returns exactly these bytes.
 */
#include "common/ft_oob.h"

#include <cstring>
#include <vector>

using namespace ft;

namespace {

constexpr int unknown_opt = 0x7ff0; /* no FI_OPT_* has this value */

std::vector<uint8_t> check_getname(const Fabric &fab, fid_ep *ep)
{
	uint8_t probe[1] = {0x5a};
	size_t need = 0;
	FT_EXPECT_RC(fi_getname(&ep->fid, probe, &need), -FI_ETOOSMALL);
	FT_CHECK(need > 0, "fi_getname with a 0-byte buffer did not set the needed length");
	FT_CHECK(probe[0] == 0x5a, "fi_getname wrote into a 0-byte buffer");

	std::vector<uint8_t> small(need, canary);
	size_t len = need - 1;
	FT_EXPECT_RC(fi_getname(&ep->fid, small.data(), &len), -FI_ETOOSMALL);
	FT_CHECK(len == need, "fi_getname with %zu bytes set the length to %zu, then %zu", need - 1,
		 need, len);
	FT_CHECK(small[need - 1] == canary, "fi_getname wrote past the %zu bytes it was given",
		 need - 1);

	std::vector<uint8_t> name(need + 8, canary);
	len = name.size();
	FT_CALL(fi_getname(&ep->fid, name.data(), &len));
	FT_CHECK(len == need, "fi_getname gave %zu bytes, after asking for %zu", len, need);
	name.resize(len);
	if (fab.info()->addr_format == FI_ADDR_EFA)
		FT_CHECK(len == 32, "an FI_ADDR_EFA name of %zu bytes, expected 32", len);
	note("fi_getname: %zu bytes (address format %s)", len,
	     fi_tostr(&fab.info()->addr_format, FI_TYPE_ADDR_FORMAT));
	return name;
}

void check_unknown_option(fid_ep *ep)
{
	int v = 1;
	FT_EXPECT_RC(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, unknown_opt, &v, sizeof v),
		     -FI_ENOPROTOOPT);
	size_t len = sizeof v;
	FT_EXPECT_RC(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, unknown_opt, &v, &len), -FI_ENOPROTOOPT);
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "fi_getname buffer sizes and unknown endpoint options");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV);
	Oob oob;
	Endpoint ep(fab, {}, {}, check_unknown_option); /* before fi_enable */
	check_unknown_option(ep);			 /* and after */
	std::vector<uint8_t> name = check_getname(fab, ep);

	oob.send_blob(name);
	std::vector<uint8_t> peer_name = oob.recv_blob();
	fi_addr_t peer = fab.insert(peer_name);
	std::vector<uint8_t> looked(peer_name.size());
	size_t len = looked.size();
	FT_CALL(fi_av_lookup(fab.av(), peer, looked.data(), &len));
	FT_CHECK(len == peer_name.size() && looked == peer_name,
		 "fi_av_lookup does not return the peer's fi_getname bytes");

	/* The name is usable: one message each way. */
	Buffer buf(fab, 128);
	fi_context2 ctx[2]{};
	FT_POST(fi_recv(ep, buf.data() + 64, 64, buf.desc(), FI_ADDR_UNSPEC, &ctx[0]));
	fill_pattern(buf.data(), 64, opts.server ? 1400 : 1401);
	oob.sync("posted");
	FT_POST(fi_send(ep, buf.data(), 64, buf.desc(), peer, &ctx[1]));
	ep.tx().wait(&ctx[1], "the send to the peer's name");
	ep.rx().wait(&ctx[0], "the message from the peer");
	FT_EXPECT_PATTERN(buf.data() + 64, 64, opts.server ? 1401 : 1400, 0, "the peer's message");
	oob.sync("end");
	return 0;
}
