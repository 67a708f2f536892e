/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_mr_revoke: RMA to a key that was revoked. The server registers a region (remote
 * read and write), fills it with a pattern and sends its key and address; the client
 * reads it once with that key (the control: address and key are right). The server then
 * closes the registration (the memory stays allocated) and says so. Then, with the old
 * key, each must complete with an error entry (err != 0; err, prov_errno and
 * fi_cq_strerror are reported), never with success:
 *   - fi_read;
 *   - fi_writemsg with FI_DELIVERY_COMPLETE (its completion waits for the target);
 *   - fi_write, on EFA (or when the tx op_flags default to FI_DELIVERY_COMPLETE): the
 *     device completes an RDMA write once the target acknowledged it. Elsewhere the
 *     default transmit-complete semantics let it complete without learning the
 *     target's refusal, which is allowed and reported.
 * Finally the server's memory must be unchanged.
 */
#include "common/ft_oob.h"

#include <string>

using namespace ft;


int main(int argc, char **argv)
{
	parse_options(argc, argv, "RMA with a revoked key completes in error");
	Fabric fab(FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	Oob oob;
	Endpoint ep(fab);
	fi_addr_t peer = oob.exchange_names(fab, ep);
	const size_t len = 4096;
	const uint32_t seed = 1100;

	if (opts.server) {
		Buffer region(fab, 4 * len, fab.local_access() | FI_REMOTE_READ | FI_REMOTE_WRITE);
		fill_pattern(region.data(), 4 * len, seed);
		oob.send_mr(region);
		oob.sync("control read done");
		region.deregister();
		oob.sync("revoked");
		oob.sync("attempts done");
		FT_EXPECT_PATTERN(region.data(), 4 * len, seed, 0,
				  "the region after RMA with its revoked key (unchanged)");
		note("the region is unchanged");
		oob.sync("end");
		return 0;
	}

	RemoteMr r = oob.recv_mr();
	Buffer local(fab, len);
	fi_context2 ctx[1]{};
	FT_POST(fi_read(ep, local.data(), len, local.desc(), peer, r.at(len), r.key, &ctx[0]));
	ep.tx().wait(&ctx[0], "the control read with the valid key");
	FT_EXPECT_PATTERN(local.data(), len, seed, len, "the control read");
	oob.sync("control read done");
	oob.sync("revoked");

	fill_pattern(local.data(), len, seed + 1);
	/*
	 * fi_write completes with the provider's default semantics. On EFA the device
	 * completes an RDMA write when the target acknowledged it, so the target's refusal
	 * must come back; with transmit-complete semantics elsewhere the initiator need not
	 * learn of it (the target's memory is checked either way).
	 */
	const bool write_must_fail =
		fab.is_efa() || (fab.info()->tx_attr->op_flags & FI_DELIVERY_COMPLETE);
	const char *const calls[] = {"fi_read", "fi_writemsg(FI_DELIVERY_COMPLETE)", "fi_write"};
	for (int k = 0; k < 3; k++) {
		/* Each from a fresh endpoint: a provider may drop the connection that carried a
		 * refused operation, and each attempt must fail for its own reason. */
		Endpoint e(fab);
		fi_context2 actx{};
		iovec iov{local.data(), len};
		void *desc = local.desc();
		fi_rma_iov riov{r.at(0), len, r.key};
		fi_msg_rma msg{&iov, &desc, 1, peer, &riov, 1, &actx, 0};
		if (k == 0)
			FT_POST(fi_read(e, local.data(), len, local.desc(), peer, r.at(2 * len),
					r.key, &actx));
		else if (k == 1)
			FT_POST(fi_writemsg(e, &msg, FI_DELIVERY_COMPLETE));
		else
			FT_POST(fi_write(e, local.data(), len, local.desc(), peer, r.at(len), r.key,
					 &actx));
		std::string what = std::string(calls[k]) + " with a revoked key";
		if (k < 2 || write_must_fail) {
			Completion c = e.tx().wait_error(&actx, what.c_str());
			FT_CHECK(c.err != 0, "the error entry of %s has err 0", what.c_str());
			note("%s: err %d (%s), prov_errno %d (%s)", what.c_str(), c.err,
			     fi_strerror(c.err), c.prov_errno, c.errstr.c_str());
		} else {
			Completion c = e.tx().wait_any(&actx, what.c_str());
			note("%s: %s (allowed: transmit-complete semantics)", what.c_str(),
			     c.error ? c.describe().c_str() : "completed without error");
		}
	}
	oob.sync("attempts done");
	oob.sync("end");
	return 0;
}
