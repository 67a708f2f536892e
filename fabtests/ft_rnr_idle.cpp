/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_rnr_idle (EFA only): FI_RM_DISABLED against a receiver that does nothing at all.
 *
 * The server opens its endpoint (the provider posts its receive buffers at fi_enable),
 * sends its name, and then blocks in read() on the control channel: it neither posts
 * receives nor reads a CQ until the client is done. The client (efa fabric, FI_MSG,
 * FI_RM_DISABLED, FI_OPT_EFA_RNR_RETRY 0) posts 2 x rx_attr->size sends of 32 bytes,
 * retrying only on -FI_EAGAIN, and reads its CQ until every send has completed. The
 * completion of a send may depend on the server's device only, never on its software:
 * the first sends complete successfully (the device took them into the buffers posted
 * at enable), the others with FI_ENORX and "Receiver not ready". A run where the client
 * never completes them all hangs, and the suite's timeout fails it.
 *
 * Then the server wakes up and posts a receive for every message: it gets exactly the
 * messages whose sends succeeded, in send order, with their bytes, and nothing of the
 * refused ones; a last message from the client arrives after them.
 */
#include "common/ft_rdm.h"

#include <cstring>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

constexpr size_t kLen = 32;

uint8_t *slot(Buffer &b, size_t i) { return static_cast<uint8_t *>(b.data()) + i * kLen; }

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "efa fabric, FI_RM_DISABLED: sends to a receiver that sleeps complete (FI_ENORX)");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV);
	if (!fab.is_efa() || interop()) /* across providers: the peer would not skip the refused ids */
		skip("receiver-not-ready handling is our efa provider's: how many sends an idle receiver takes "
		     "depends on its receive buffers being posted at enable (the provider is %s)",
		     fab.prov_label());
	fab.info()->domain_attr->resource_mgmt = FI_RM_DISABLED;
	const size_t n = 2 * fab.info()->rx_attr->size;
	EpSpec spec = ep_spec(fab);
	spec.before_enable = [](fid_ep *e) {
		size_t retry = 0;
		FT_CALL(fi_setopt(&e->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry, sizeof retry));
	};
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */
	Endpoint ep(fab, spec);
	fi_addr_t peer = ctl.exchange_names(fab, ep);
	Buffer buf(fab, (n + 1) * kLen);
	std::vector<fi_context2> ctx(n + 1);

	if (opts.server) {
		/* Asleep: blocked in read() on the control channel, the endpoint untouched. */
		ctl_progress = false;
		ctl.await("sends done");
		ctl_progress = true;
		const size_t ok = ctl.get<size_t>();
		std::vector<size_t> delivered(ok);
		for (size_t &i : delivered)
			i = ctl.get<size_t>();
		for (size_t k = 0; k <= ok; k++) {
			memset(slot(buf, k), 0, kLen);
			FT_POST(fi_recv(ep, slot(buf, k), kLen, buf.desc(), FI_ADDR_UNSPEC, &ctx[k]));
		}
		/* Untagged receives match in message order: receive k gets the k-th message
		 * that was delivered, and the last receive the message after them all. */
		for (size_t k = 0; k <= ok; k++) {
			Entry e = ep.rx().wait(&ctx[k], "receive");
			const uint32_t seed = uint32_t(k < ok ? delivered[k] : n);
			FT_CHECK(e.len == kLen, "receive %zu: %zu bytes", k, e.len);
			FT_EXPECT_PATTERN(slot(buf, k), kLen, seed, 0, "message");
		}
		ep.rx().expect_empty("after the last message: a refused message was delivered");
		printf("server: %zu messages received in order, then the last one\n", ok);
		ctl.sync("done");
		(void)peer;
		return 0;
	}

	/* Every send, retried only on back-pressure; the CQ read until all completed. */
	size_t posted = 0, completed = 0, eagain = 0;
	std::vector<int> result(n, -1); /* 0 success, 1 FI_ENORX */
	auto take = [&](const Entry &e) {
		const ptrdiff_t idx = static_cast<fi_context2 *>(e.ctx) - ctx.data();
		FT_CHECK(idx >= 0 && size_t(idx) < n && result[size_t(idx)] < 0, "a completion for no send, or twice: %s",
			 e.describe().c_str());
		if (e.error) {
			FT_CHECK(e.err == FI_ENORX && e.errstr.find("not ready") != std::string::npos,
				 "send %zd: %s (expected FI_ENORX, \"... not ready ...\")", idx, e.describe().c_str());
			result[size_t(idx)] = 1;
		} else {
			result[size_t(idx)] = 0;
		}
		completed++;
	};
	while (posted < n) {
		fill_pattern(slot(buf, posted), kLen, uint32_t(posted), 0);
		ssize_t rc = fi_send(ep, slot(buf, posted), kLen, buf.desc(), peer, &ctx[posted]);
		if (rc == -FI_EAGAIN) {
			eagain++;
			while (std::optional<Entry> e = ep.tx().poll())
				take(*e);
			continue;
		}
		if (rc)
			FT_FAIL("fi_send %zu: %s", posted, fi_strerror(int(-rc)));
		posted++;
	}
	while (completed < n)
		take(ep.tx().next("send"));
	std::vector<size_t> delivered;
	for (size_t i = 0; i < n; i++)
		if (result[i] == 0)
			delivered.push_back(i);
	const size_t refused = n - delivered.size();
	printf("client: %zu sends of %zu bytes to a sleeping receiver: %zu succeeded, %zu FI_ENORX "
	       "(%zu -FI_EAGAIN on the way)\n",
	       n, kLen, delivered.size(), refused, eagain);
	FT_CHECK(result[0] == 0, "the first send failed: the device had buffers posted at enable");
	FT_CHECK(refused > 0, "no send failed with %zu sends to %zu receive buffers", n, n / 2);
	FT_CHECK(result[n - 1] == 1, "the last send succeeded although the receiver never reposted");
	ctl.notify("sends done");
	ctl.put(delivered.size());
	for (size_t i : delivered)
		ctl.put(i);

	/* The last message: the application retries on FI_ENORX while the server drains. */
	fill_pattern(slot(buf, n), kLen, uint32_t(n), 0);
	for (int tries = 0;; tries++) {
		FT_POST(fi_send(ep, slot(buf, n), kLen, buf.desc(), peer, &ctx[n]));
		Entry e = ep.tx().wait_any(&ctx[n], "last message");
		if (!e.error)
			break;
		FT_CHECK(e.err == FI_ENORX && tries < 100000, "last message: %s", e.describe().c_str());
	}
	ctl.sync("done");
	return 0;
}
