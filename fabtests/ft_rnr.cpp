/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_rnr (EFA only: skipped with exit 77 on other providers): receiver not ready with
 * no retries. The client sets FI_OPT_EFA_RNR_RETRY to 0 (a size_t, on FI_OPT_ENDPOINT,
 * before fi_enable); the server posts no receive. The client's send must complete with
 * an error entry whose err is FI_ENORX and whose fi_cq_strerror text contains
 * "Receiver not ready". An unknown option name on the same level must give
 * -FI_ENOPROTOOPT. Then the server posts a receive and a second send must arrive, so
 * the endpoint survives the error.
 */
#include "common/ft_oob.h"

#include <cstring>

using namespace ft;

int main(int argc, char **argv)
{
	parse_options(argc, argv, "EFA: receiver-not-ready error with FI_OPT_EFA_RNR_RETRY 0");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV);
	if (!fab.is_efa() && !fab.is_upstream_efa())
		skip("FI_OPT_EFA_RNR_RETRY is EFA-specific; the provider is %s", fab.prov_name());
	Oob oob;
	Endpoint ep(fab, {}, {}, [](fid_ep *e) {
		size_t retry = 0;
		FT_CALL(fi_setopt(&e->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry,
				  sizeof retry));
		int unknown = 0;
		FT_EXPECT_RC(fi_setopt(&e->fid, FI_OPT_ENDPOINT, 0x7ff0, &unknown, sizeof unknown),
			     -FI_ENOPROTOOPT);
	});
	fi_addr_t peer = oob.exchange_names(fab, ep);
	const size_t len = 256;
	Buffer buf(fab, len);
	fi_context2 ctx[2]{};

	if (opts.server) {
		oob.sync("no receive posted");
		oob.sync("rnr seen");
		FT_POST(fi_recv(ep, buf.data(), len, buf.desc(), FI_ADDR_UNSPEC, &ctx[0]));
		oob.sync("posted");
		ep.rx().wait(&ctx[0], "the send after the RNR error");
		FT_EXPECT_PATTERN(buf.data(), len, 1201, 0, "the send after the RNR error");
		ep.rx().expect_empty("the rejected message is not delivered later");
		oob.sync("end");
		return 0;
	}
	oob.sync("no receive posted");
	fill_pattern(buf.data(), len, 1200);
	FT_POST(fi_send(ep, buf.data(), len, buf.desc(), peer, &ctx[0]));
	Completion c =
		ep.tx().wait_error(&ctx[0], "a send to a peer without receives (RNR retry 0)");
	note("send without receiver: err %d (%s), prov_errno %d (%s)", c.err, fi_strerror(c.err),
	     c.prov_errno, c.errstr.c_str());
	FT_CHECK(c.err == FI_ENORX, "err %d (%s), expected FI_ENORX", c.err, fi_strerror(c.err));
	FT_CHECK(c.errstr.find("not ready") != std::string::npos,
		 "fi_cq_strerror gave '%s', which lacks 'not ready'", c.errstr.c_str());
	oob.sync("rnr seen");
	oob.sync("posted");
	fill_pattern(buf.data(), len, 1201);
	FT_POST(fi_send(ep, buf.data(), len, buf.desc(), peer, &ctx[1]));
	ep.tx().wait(&ctx[1], "the send after the RNR error");
	oob.sync("end");
	return 0;
}
