/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_multi_recv: FI_MULTI_RECV receive buffers (fi_msg(3) "FI_MULTI_RECV", fi_cq(3)
 * "buf" and "FI_MULTI_RECV", fi_endpoint(3) FI_OPT_MIN_MULTI_RECV).
 *
 * The server sets FI_OPT_MIN_MULTI_RECV to 256 before fi_enable (and reads it back), and
 * posts two multi-receive buffers with fi_recvmsg(FI_MULTI_RECV): A of 16 KiB, then B of
 * 64 KiB. The client sends 300 messages of 4 .. 256 bytes back to back (fi_send, every
 * 5th fi_senddata, every 7th fi_inject when it fits); each starts with its index.
 *
 * Checked, reading the server's receive CQ in order:
 *   - every message arrives exactly once, in an entry with op_context A's or B's,
 *     FI_RECV|FI_MSG, len, data (FI_REMOTE_CQ_DATA exactly with data), the source
 *     (FI_SOURCE), and buf pointing inside that buffer with buf + len inside it; the bytes
 *     at buf are the message;
 *   - messages are placed back to back in send order (FI_ORDER_SAS; without it, in some
 *     order): in each buffer, a later message lies after the previous one (alignment
 *     padding allowed), nothing overlaps, A holds a prefix of the messages and B the
 *     rest; every byte of A and B that no message covers is still the canary;
 *   - A is released exactly once: FI_MULTI_RECV on the entry of its last message, or on
 *     an entry of its own with no other flag (fi_cq(3)); after that entry nothing more
 *     lands in A; it is released when less than 256 bytes are left after its last
 *     message (up to 64 more allowed for alignment), and no message lands in it once
 *     less than 256 were left; B, with more than 256 left, is not released;
 *   - fi_cancel of B then completes it: an FI_ECANCELED error entry with B's context, or
 *     an FI_MULTI_RECV release entry (fi_cancel(3) does not say which for multi-receive
 *     buffers).
 */
#include "common/ft_rdm.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

constexpr size_t min_multi = 256;
constexpr size_t a_cap = 16384, b_cap = 65536;
constexpr size_t b_off = a_cap + 4096; /* B in the same registration, after a gap */
constexpr int n_msgs = 300;
constexpr size_t align_slack = 64;

size_t len_of(int i) { return 4 + size_t(i) * 53 % 253; }
uint32_t seed_of(int i) { return uint32_t(40000 + i); }
bool data_of(int i) { return i % 5 == 1; }

void fill_msg(uint8_t *p, int i)
{
	uint32_t idx = uint32_t(i);
	memcpy(p, &idx, 4);
	fill_pattern(p + 4, len_of(i) - 4, seed_of(i), 4);
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "FI_MULTI_RECV buffers with FI_OPT_MIN_MULTI_RECV");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV | FI_MULTI_RECV, FI_SOURCE);
	request_order(fab, FI_ORDER_SAS);
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */
	const bool cq_data = fab.cq_data_size() > 0;
	EpSpec spec = ep_spec(fab);
	spec.before_enable = [](fid_ep *e) {
		if (!opts.server)
			return;
		size_t v = min_multi;
		FT_CALL(fi_setopt(&e->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, sizeof v));
		size_t got = 0, len = sizeof got;
		FT_CALL(fi_getopt(&e->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got, &len));
		FT_CHECK(got == min_multi && len == sizeof got,
			 "fi_getopt(FI_OPT_MIN_MULTI_RECV) gave %zu (len %zu) after setting %zu",
			 got, len, min_multi);
	};
	Endpoint ep(fab, spec);
	fi_addr_t peer = ctl.exchange_names(fab, ep);
	const bool sas = has_order(fab, FI_ORDER_SAS);
	if (!sas)
		skip_part("FI_ORDER_SAS is not advertised: placement in send order is not checked "
			  "(only back to back, without overlap)");
	if (!fab.has(FI_SOURCE))
		skip_part("FI_SOURCE is not advertised: source addresses are not checked");
	if (!cq_data)
		skip_part("cq_data_size is 0: no remote CQ data");
	auto data_val = [&](int i) { return fab.cq_data(0x3333000000000000ull + uint64_t(i)); };

	if (opts.client) {
		Buffer sbuf(fab, 256 * n_msgs);
		std::vector<fi_context2> ctx(n_msgs);
		std::vector<bool> injected(n_msgs);
		ctl.sync("posted");
		for (int i = 0; i < n_msgs; i++) {
			uint8_t *p = sbuf.data() + 256 * i;
			fill_msg(p, i);
			if (cq_data && data_of(i)) {
				FT_POST(fi_senddata(ep, p, len_of(i), sbuf.desc(), data_val(i), peer,
						     &ctx[size_t(i)]));
			} else if (i % 7 == 3 && len_of(i) <= fab.inject_size()) {
				FT_POST(fi_inject(ep, p, len_of(i), peer));
				injected[size_t(i)] = true;
			} else {
				FT_POST(fi_send(ep, p, len_of(i), sbuf.desc(), peer, &ctx[size_t(i)]));
			}
		}
		for (int i = 0; i < n_msgs; i++)
			if (!injected[size_t(i)])
				ep.tx().wait(&ctx[size_t(i)], "send " + std::to_string(i));
		ctl.sync("received");
		ctl.sync("end");
		return 0;
	}

	Buffer rbuf(fab, b_off + b_cap + 4096);
	uint8_t *const A = rbuf.data(), *const B = rbuf.data() + b_off;
	fi_context2 ca{}, cb{};
	for (auto [base, cap, ctx] : {std::tuple{A, a_cap, &ca}, std::tuple{B, b_cap, &cb}}) {
		iovec iov{base, cap};
		void *desc = rbuf.desc();
		fi_msg m{&iov, &desc, 1, FI_ADDR_UNSPEC, ctx, 0};
		FT_POST(fi_recvmsg(ep, &m, FI_MULTI_RECV));
	}
	ctl.sync("posted");

	struct Placed {
		int buffer; /* 0: A, 1: B */
		size_t off, len;
	};
	std::map<int, Placed> placed; /* by message index */
	bool a_released = false;
	int n_entries = 0;
	while (placed.size() < size_t(n_msgs) || !a_released) {
		Entry e = ep.rx().next("multi-receive entries");
		n_entries++;
		std::string what = "entry " + std::to_string(n_entries) + " (" + e.describe() + ")";
		FT_CHECK(!e.error, "%s", what.c_str());
		FT_CHECK(e.ctx == &ca || e.ctx == &cb, "%s: op_context is neither A's %p nor B's %p",
			 what.c_str(), (void *)&ca, (void *)&cb);
		int which = e.ctx == &ca ? 0 : 1;
		uint8_t *base = which ? B : A;
		size_t cap = which ? b_cap : a_cap;
		if (which == 0)
			FT_CHECK(!a_released, "%s: an entry for A after A was released",
				 what.c_str());
		if (!(e.flags & FI_RECV)) {
			/* A release entry of its own: no other flag. */
			FT_CHECK(e.flags == FI_MULTI_RECV,
				 "%s: an entry without FI_RECV must be a release, flags exactly "
				 "FI_MULTI_RECV",
				 what.c_str());
		} else {
			FT_CHECK(e.buf, "%s: a multi-receive entry without buf", what.c_str());
			auto *p = static_cast<uint8_t *>(e.buf);
			FT_CHECK(p >= base && e.len <= cap && p + e.len <= base + cap,
				 "%s: buf %p + len %zu is not inside %s [%p, %p)", what.c_str(), e.buf,
				 e.len, which ? "B" : "A", (void *)base, (void *)(base + cap));
			FT_CHECK(e.len >= 4, "%s: len %zu, every message has 4 bytes or more",
				 what.c_str(), e.len);
			uint32_t idx;
			memcpy(&idx, p, 4);
			int i = int(idx);
			FT_CHECK(i >= 0 && i < n_msgs && !placed.count(i),
				 "%s: the data starts with index %u: no such message, or it came twice",
				 what.c_str(), idx);
			FT_CHECK(e.len == len_of(i), "%s: message %d has %zu bytes", what.c_str(), i,
				 len_of(i));
			bool d = cq_data && data_of(i);
			expect_flags(e, FI_RECV | FI_MSG | (d ? FI_REMOTE_CQ_DATA : 0),
				     FI_SEND | FI_TAGGED | (d ? 0 : FI_REMOTE_CQ_DATA), what);
			if (d)
				FT_CHECK(e.data == data_val(i), "%s: data 0x%llx, expected 0x%llx",
					 what.c_str(), (unsigned long long)e.data,
					 (unsigned long long)data_val(i));
			if (fab.has(FI_SOURCE))
				FT_CHECK(e.src == peer, "%s: source %llu, expected %llu", what.c_str(),
					 (unsigned long long)e.src, (unsigned long long)peer);
			FT_EXPECT_PATTERN(p + 4, e.len - 4, seed_of(i), 4, what.c_str());
			placed[i] = {which, size_t(p - base), e.len};
		}
		if (e.flags & FI_MULTI_RECV) {
			FT_CHECK(which == 0, "%s: B released, but it has room for many more messages",
				 what.c_str());
			a_released = true;
		}
	}

	/* Placement: with FI_ORDER_SAS, A holds messages 0..k-1 and B the rest, each buffer
	 * in send order; without it, in any order, but back to back and not overlapping. */
	std::vector<std::pair<int, Placed>> seq(placed.begin(), placed.end());
	if (!sas)
		std::sort(seq.begin(), seq.end(), [](auto &x, auto &y) {
			return std::pair(x.second.buffer, x.second.off) <
			       std::pair(y.second.buffer, y.second.off);
		});
	size_t end[2] = {0, 0};
	int last_in_a = -1;
	for (auto &[i, pl] : seq) {
		FT_CHECK(pl.off >= end[pl.buffer],
			 "message %d at offset %zu of %s overlaps or precedes the message before "
			 "it (which ends at %zu)%s",
			 i, pl.off, pl.buffer ? "B" : "A", end[pl.buffer],
			 sas ? ": not placed in send order" : "");
		FT_CHECK(pl.off - end[pl.buffer] < align_slack,
			 "message %d at offset %zu of %s leaves a gap of %zu bytes after the message "
			 "before it (not back to back)",
			 i, pl.off, pl.buffer ? "B" : "A", pl.off - end[pl.buffer]);
		if (pl.buffer == 0) {
			FT_CHECK(end[1] == 0, "message %d is in A after messages went to B", i);
			last_in_a = i;
			/* A was not released before this message, so there was room. */
			FT_CHECK(a_cap - pl.off >= min_multi || pl.off == 0,
				 "message %d placed in A at offset %zu, with %zu bytes left, below "
				 "FI_OPT_MIN_MULTI_RECV %zu: A should have been released before",
				 i, pl.off, a_cap - pl.off, min_multi);
		}
		end[pl.buffer] = pl.off + pl.len;
	}
	FT_CHECK(last_in_a >= 0, "no message landed in A");
	size_t a_left = a_cap - end[0];
	FT_CHECK(a_left < min_multi + align_slack,
		 "A was released with %zu bytes left after its last message (message %d): "
		 "FI_OPT_MIN_MULTI_RECV is %zu",
		 a_left, last_in_a, min_multi);
	FT_CHECK(b_cap - end[1] >= min_multi, "B is nearly full (%zu left): the test is wrong",
		 b_cap - end[1]);

	/* Bytes no message covers are untouched (padding included). */
	std::vector<bool> covered(b_off + b_cap);
	for (auto &[i, pl] : placed)
		for (size_t k = 0; k < pl.len; k++)
			covered[(pl.buffer ? b_off : 0) + pl.off + k] = true;
	for (size_t k = 0; k < b_off + b_cap + 4096; k++)
		if (k >= covered.size() || !covered[k])
			FT_CHECK(rbuf.data()[k] == canary,
				 "byte %zu of the receive region (%s) was written, but no message "
				 "covers it",
				 k, k < a_cap ? "A" : k < b_off ? "between A and B" : "B or after");

	/* B is still posted: cancel it. */
	ep.rx().expect_empty("B has room left: no release yet");
	FT_EXPECT_RC(fi_cancel(&ep.ep()->fid, &cb), 0);
	Entry c = ep.rx().wait_any(&cb, "fi_cancel of B");
	FT_CHECK((c.error && c.err == FI_ECANCELED) ||
			 (!c.error && (c.flags & FI_MULTI_RECV) && !(c.flags & FI_RECV)),
		 "fi_cancel of B: %s; expected FI_ECANCELED or an FI_MULTI_RECV release",
		 c.describe().c_str());
	ctl.sync("received");
	note("%d messages in %d entries: A (16 KiB) held messages 0..%d and was released with %zu "
	     "bytes left (min %zu), B (64 KiB) the rest; cancel of B: %s",
	     n_msgs, n_entries, last_in_a, a_left, min_multi,
	     c.error ? "FI_ECANCELED" : "FI_MULTI_RECV release");
	ctl.sync("end");
	return 0;
}
