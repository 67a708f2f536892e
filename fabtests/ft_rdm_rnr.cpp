/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_rdm_rnr (EFA only): a receiver that does not progress, on the efa fabric.
 *
 * An efa endpoint keeps its own receive buffers posted; when the receiving process does
 * not read its CQ, they run out and the sender's device reports receiver-not-ready (RNR).
 * The runner gives the server few buffers (FI_EFA_RX_PKT_POOL_SIZE) so that this happens.
 *
 * Part 1, FI_RM_ENABLED (the default): the client sends `n` tagged messages (tag i for
 * message i) while the server is busy elsewhere (it waits on the control channel,
 * reading no CQ) until a send returns -FI_EAGAIN: the back-pressure of a peer in RNR
 * backoff. Then the server posts its receives late and reads its CQ while the client
 * sends the rest: every message arrives with its bytes and every send completes
 * successfully. Nothing is lost.
 *
 * Part 2, FI_RM_DISABLED with FI_OPT_EFA_RNR_RETRY 0: the same from a second client
 * endpoint, except that nothing holds a send back: all `n` are posted and complete
 * while the server still reads no CQ (ft_rnr_idle is the same with a server that
 * never touches its endpoint). Sends that found no buffer complete with FI_ENORX and a
 * message saying "Receiver not ready"; the others succeed. The server gets exactly the messages whose
 * sends succeeded: the receive for each refused one is still pending (fi_cancel gives
 * FI_ECANCELED), so a refused message is never delivered later. The endpoint goes on
 * working (a last message after the flood).
 */
#include "common/ft_rdm.h"


#include <cstring>
#include <set>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

constexpr size_t kLen = 1024;
constexpr uint64_t kTag1 = 0x100000, kTag2 = 0x200000, kLast = 0x300000;

uint8_t *slot(Buffer &b, int i) { return static_cast<uint8_t *>(b.data()) + size_t(i) * kLen; }

/* The client's flood: posts until a send is refused for back-pressure, lets the server
 * go, posts the rest; returns the sends that failed once all completed. `ours`: the
 * sender runs our provider, which pushes back with -FI_EAGAIN; upstream's (a pair on two
 * providers) queues every send and retries the refused packets itself. */
std::set<int> flood(Ctl &ctl, const char *step, Endpoint &ep, fi_addr_t peer, Buffer &buf, int n, uint64_t tag,
		    bool may_fail, bool ours)
{
	std::vector<fi_context2> ctx(static_cast<size_t>(n));
	int i = 0;
	for (; i < n && may_fail; i++) {
		/* FI_RM_DISABLED: no back-pressure; every send completes before the server
		 * wakes up (below, before notify). */
		fill_pattern(slot(buf, i), kLen, uint32_t(tag + i), 0);
		FT_POST(fi_tsend(ep, slot(buf, i), kLen, buf.desc(), peer, tag + i, &ctx[size_t(i)]));
	}
	for (; i < n; i++) {
		fill_pattern(slot(buf, i), kLen, uint32_t(tag + i), 0);
		ssize_t rc = fi_tsend(ep, slot(buf, i), kLen, buf.desc(), peer, tag + i, &ctx[size_t(i)]);
		if (rc == -FI_EAGAIN)
			break;
		if (rc)
			FT_FAIL("fi_tsend %d: %s", i, fi_strerror(int(-rc)));
		ep.tx().progress();
	}
	if (i == n && !may_fail && ours)
		FT_FAIL("%d sends, never -FI_EAGAIN: the server's buffers never ran out (raise -n)", n);
	if (!may_fail) {
		if (i < n)
			printf("%s: back-pressure (-FI_EAGAIN) after %d sends\n", step, i);
		else
			printf("%s: %d sends posted (upstream's sender queues them: no -FI_EAGAIN)\n", step, n);
		ctl.notify(step);
	}
	for (; i < n; i++) {
		if (i > 0)
			fill_pattern(slot(buf, i), kLen, uint32_t(tag + i), 0); /* slot i is filled once more */
		FT_POST(fi_tsend(ep, slot(buf, i), kLen, buf.desc(), peer, tag + i, &ctx[size_t(i)]));
	}
	/* Completions come in any order: take them as they come, each send exactly once. */
	std::set<int> failed, done;
	for (int k = 0; k < n; k++) {
		Entry e = ep.tx().next("flood send");
		const ptrdiff_t idx = static_cast<fi_context2 *>(e.ctx) - ctx.data();
		FT_CHECK(idx >= 0 && idx < n && done.insert(int(idx)).second, "a completion for no send, or twice: %s",
			 e.describe().c_str());
		if (!e.error)
			continue;
		if (!may_fail || e.err != FI_ENORX || e.errstr.find("not ready") == std::string::npos)
			FT_FAIL("send %d: %s (expected %s)", int(idx), e.describe().c_str(),
				may_fail ? "FI_ENORX, \"... not ready ...\"" : "success");
		failed.insert(int(idx));
	}
	if (may_fail) {
		printf("%s: %d sends completed while the server read no CQ\n", step, n);
		ctl.notify(step);
	}
	return failed;
}

} // namespace

int main(int argc, char **argv)
{
	const int n = int(take_number(argc, argv, "-n", 400));
	parse_options(argc, argv, "efa fabric: receiver not ready (late receiver; FI_RM_DISABLED with no retries)");
	Fabric fab(FI_TAGGED | FI_SEND | FI_RECV);
	if (!fab.is_efa() && !interop())
		skip("receiver-not-ready handling is our efa provider's: the run shrinks its receive pool "
		     "(FI_EFA_RX_PKT_POOL_SIZE) (the provider is %s)",
		     fab.prov_label());
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */
	/* Across providers (EFA_FT_INTEROP): part 1 either way (the late receiver's pool is
	 * small: FI_EFA_RX_PKT_POOL_SIZE for ours, FI_EFA_RX_SIZE for upstream's; an upstream
	 * sender retries refused packets itself); part 2 needs ours at both ends (FI_ENORX,
	 * then EXT_VOID). */
	const bool both_ours = fab.is_efa() && fab.peer_efa();
	Endpoint ep(fab, ep_spec(fab));
	fi_addr_t peer = ctl.exchange_names(fab, ep);
	Buffer buf(fab, size_t(n + 1) * kLen);

	if (opts.server) {
		std::vector<uint8_t> name2 = ctl.recv_blob();
		fi_addr_t peer2;
		FT_EXPECT_RC(fi_av_insert(fab.av(), name2.data(), 1, &peer2, 0, nullptr), 1);
		std::vector<fi_context2> ctx(static_cast<size_t>(n) + 1);
		for (int part = 1; part <= (both_ours ? 2 : 1); part++) {
			const uint64_t tag = part == 1 ? kTag1 : kTag2;
			/* Reading no CQ until the client is held back. */
			ctl_progress = false;
			ctl.await(part == 1 ? "flood 1" : "flood 2");
			ctl_progress = true;
			for (int i = 0; i < n; i++) {
				memset(slot(buf, i), 0, kLen);
				FT_POST(fi_trecv(ep, slot(buf, i), kLen, buf.desc(), FI_ADDR_UNSPEC, tag + i, 0,
						  &ctx[size_t(i)]));
			}
			std::set<int> failed;
			const int count = ctl.get<int>();
			for (int k = 0; k < count; k++)
				failed.insert(ctl.get<int>());
			for (int i = 0; i < n; i++) {
				if (failed.count(i))
					continue;
				Entry e = ep.rx().wait(&ctx[size_t(i)], "flood receive");
				FT_EXPECT_PATTERN(slot(buf, i), kLen, uint32_t(tag + i), 0, "flood message");
				FT_CHECK(e.len == kLen && e.tag == tag + uint64_t(i), "receive %d: len %zu, tag %#lx", i, e.len, (unsigned long)e.tag);
			}
			/* A refused message never arrives: its receive is still there. */
			for (int i : failed) {
				FT_EXPECT_RC(fi_cancel(&ep.ep()->fid, &ctx[size_t(i)]), 0);
				Entry e = ep.rx().wait_error(&ctx[size_t(i)], "cancel of a refused message's receive");
				FT_CHECK(e.err == FI_ECANCELED, "receive %d: %s", i, e.describe().c_str());
			}
			ep.rx().expect_empty("after the flood");
			printf("part %d: %zu of %d messages received, %zu refused and never delivered\n", part,
			       size_t(n) - failed.size(), n, failed.size());
			ctl.notify(part == 1 ? "flood 1 received" : "flood 2 received");
		}
		if (!both_ours) {
			skip_part("part 2 (FI_RM_DISABLED, FI_ENORX and the skipped message ids) across providers");
			ctl.sync("done");
			return 0;
		}
		/* The endpoint that saw FI_ENORX still works. */
		FT_POST(fi_trecv(ep, slot(buf, 0), kLen, buf.desc(), peer2, kLast, 0, &ctx[0]));
		ep.rx().wait(&ctx[0], "last message");
		FT_EXPECT_PATTERN(slot(buf, 0), kLen, uint32_t(kLast), 0, "last message");
		ctl.sync("done");
		(void)peer;
		return 0;
	}

	/* A second endpoint with FI_RM_DISABLED and no device retries. */
	fab.info()->domain_attr->resource_mgmt = FI_RM_DISABLED;
	EpSpec spec = ep_spec(fab);
	spec.before_enable = [](fid_ep *e) {
		size_t retry = 0;
		FT_CALL(fi_setopt(&e->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry, sizeof retry));
	};
	Endpoint ep2(fab, spec);
	ctl.send_blob(ep2.name());

	std::set<int> f1 = flood(ctl, "flood 1", ep, peer, buf, n, kTag1, false, fab.is_efa());
	FT_CHECK(f1.empty(), "%zu sends failed with FI_RM_ENABLED", f1.size());
	ctl.put(0);
	ctl.await("flood 1 received");
	printf("part 1: %d sends completed (FI_RM_ENABLED: none failed)\n", n);
	if (!both_ours) {
		skip_part("part 2 (FI_RM_DISABLED, FI_ENORX and the skipped message ids) across providers");
		ctl.sync("done");
		return 0;
	}

	std::set<int> f2 = flood(ctl, "flood 2", ep2, peer, buf, n, kTag2, true, true);
	ctl.put(int(f2.size()));
	for (int i : f2)
		ctl.put(i);
	if (f2.empty())
		FT_FAIL("no send failed with FI_ENORX under FI_RM_DISABLED and no retries");
	ctl.await("flood 2 received");
	printf("part 2: %zu of %d sends failed with FI_ENORX, the rest were delivered\n", f2.size(), n);

	/* Without resource management a send may still find no buffer (the server is
	 * draining): the application retries, as FI_RM_DISABLED asks of it. */
	fill_pattern(slot(buf, 0), kLen, uint32_t(kLast), 0);
	fi_context2 ctx{};
	for (int tries = 0;; tries++) {
		FT_POST(fi_tsend(ep2, slot(buf, 0), kLen, buf.desc(), peer, kLast, &ctx));
		Entry e = ep2.tx().wait_any(&ctx, "last message");
		if (!e.error)
			break;
		FT_CHECK(e.err == FI_ENORX && tries < 1000, "last message: %s", e.describe().c_str());
	}
	ctl.sync("done");
	return 0;
}
