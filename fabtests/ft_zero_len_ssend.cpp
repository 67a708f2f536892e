/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_zero_len_ssend: what Open MPI's OFI MTL does for a synchronous send's
 * acknowledgement, and sends to oneself.
 *
 * The client's endpoint has its transmit CQ bound with FI_SELECTIVE_COMPLETION. It sends
 * zero-length tagged messages with fi_tsendmsg(msg_iov NULL, desc NULL, iov_count 0,
 * context NULL, data 0) and flags 0: no completion may ever appear at the sender
 * (fi_cq(3) FI_SELECTIVE_COMPLETION, fi_tagged(3) FI_COMPLETION), and the server must
 * receive each: an entry with len 0, the tag, FI_RECV|FI_TAGGED, no FI_REMOTE_CQ_DATA,
 * the source (FI_SOURCE), and nothing written to its buffer. Cases:
 *   - into a posted 16 B receive, and into a posted receive with buf NULL, len 0;
 *   - before the server posts (unexpected; a marker orders it with FI_ORDER_SAS);
 *   - with FI_REMOTE_CQ_DATA (still flags without FI_COMPLETION): the data arrives;
 *   - 100 in a row, then one with FI_COMPLETION and a context: the transmit CQ then
 *     holds exactly that one entry (op_context, FI_SEND|FI_TAGGED), and all 101 arrive.
 * Then each process sends to its own address (fi_getname, fi_av_insert): 0 B (the NULL
 * fi_tsendmsg), 1000 B and 1 MiB; each arrives with its data, len, tag and, with
 * FI_SOURCE, the process's own fi_addr_t as the source.
 */
#include "common/ft_rdm.h"

#include <cstring>
#include <string>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

constexpr uint64_t T = 0x55e4d00000000000ull;
constexpr uint64_t marker = 0x4d41524b00000000ull;

/* Open MPI's call: no iov, no descriptor, no context, no data, no flags. */
ssize_t zero_len(fid_ep *ep, fi_addr_t to, uint64_t tag, uint64_t flags = 0, void *ctx = nullptr,
		 uint64_t data = 0)
{
	fi_msg_tagged m{nullptr, nullptr, 0, to, tag, 0, ctx, data};
	return fi_tsendmsg(ep, &m, flags);
}

struct Ctx {
	Fabric &fab;
	Endpoint &ep;
	Buffer buf;
	bool src;
	Ctx(Fabric &f, Endpoint &e) : fab(f), ep(e), buf(f, (2u << 20) + 4096), src(f.has(FI_SOURCE)) {}

	void check_zero(const Entry &e, uint64_t tag, fi_addr_t from, const std::string &what,
			bool data = false, uint64_t value = 0)
	{
		FT_CHECK(e.len == 0, "%s: len %zu", what.c_str(), e.len);
		FT_CHECK(e.tag == tag, "%s: tag 0x%llx, expected 0x%llx", what.c_str(),
			 (unsigned long long)e.tag, (unsigned long long)tag);
		expect_flags(e, FI_RECV | FI_TAGGED | (data ? FI_REMOTE_CQ_DATA : 0),
			     FI_SEND | (data ? 0 : FI_REMOTE_CQ_DATA), what);
		if (data)
			FT_CHECK(e.data == value, "%s: data 0x%llx, expected 0x%llx", what.c_str(),
				 (unsigned long long)e.data, (unsigned long long)value);
		if (src)
			FT_CHECK(e.src == from, "%s: source %llu, expected %llu", what.c_str(),
				 (unsigned long long)e.src, (unsigned long long)from);
	}
};

/* Sends to this process's own address. */
void self_sends(Ctx &c, bool selective)
{
	fi_addr_t self = c.fab.insert(c.ep.name());
	const size_t lens[] = {0, 1000, std::min<size_t>(1u << 20, c.fab.max_msg_size())};
	Buffer sbuf(c.fab, (1u << 20) + 4096);
	for (size_t len : lens) {
		std::string what = "a " + size_str(len) + " message to self";
		uint64_t tag = T + 0x5e1f00 + len;
		fi_context2 rctx{}, sctx{};
		memset(c.buf.data(), canary, len + 64);
		FT_POST(fi_trecv(c.ep, c.buf.data(), len + 64, c.buf.desc(), FI_ADDR_UNSPEC, tag, 0,
				  &rctx));
		bool want_completion = false;
		if (len == 0 && selective) {
			FT_POST(zero_len(c.ep, self, tag));
		} else if (len == 0) {
			/* Without selective completion a send completes: give it a context. */
			FT_POST(zero_len(c.ep, self, tag, 0, &sctx));
			want_completion = true;
		} else {
			fill_pattern(sbuf.data(), len, uint32_t(len));
			iovec iov{sbuf.data(), len};
			void *desc = sbuf.desc();
			fi_msg_tagged m{&iov, &desc, 1, self, tag, 0, &sctx, 0};
			FT_POST(fi_tsendmsg(c.ep, &m, selective ? FI_COMPLETION : 0));
			want_completion = true;
		}
		Entry e = c.ep.rx().wait(&rctx, what);
		FT_CHECK(e.len == len && e.tag == tag, "%s: entry %s", what.c_str(),
			 e.describe().c_str());
		expect_flags(e, FI_RECV | FI_TAGGED, FI_SEND | FI_REMOTE_CQ_DATA, what);
		if (c.src)
			FT_CHECK(e.src == self, "%s: source %llu, this endpoint is %llu", what.c_str(),
				 (unsigned long long)e.src, (unsigned long long)self);
		FT_EXPECT_PATTERN(c.buf.data(), len, uint32_t(len), 0, what.c_str());
		FT_EXPECT_BYTES(c.buf.data() + len, 64, canary, (what + ": after the data").c_str());
		if (want_completion) {
			Entry s = c.ep.tx().wait(&sctx, what + " (send)");
			expect_flags(s, FI_SEND | FI_TAGGED, FI_RECV, what + " (send)");
		}
	}
	if (selective)
		c.ep.tx().expect_empty("the NULL zero-length send to self gave no completion");
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv,
		      "Open MPI's zero-length fi_tsendmsg without completion, and sends to self");
	Fabric fab(FI_TAGGED | FI_SEND | FI_RECV, FI_SOURCE);
	request_order(fab, FI_ORDER_SAS);
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */
	const bool sas = has_order(fab, FI_ORDER_SAS);
	const bool cq_data = fab.cq_data_size() > 0;
	EpSpec spec = ep_spec(fab);
	if (opts.client)
		spec.tx.bind_flags = FI_SELECTIVE_COMPLETION;
	Endpoint ep(fab, spec);
	fi_addr_t peer = ctl.exchange_names(fab, ep);
	Ctx c(fab, ep);
	if (!c.src)
		skip_part("FI_SOURCE is not advertised: sources are not checked");
	if (!cq_data)
		skip_part("cq_data_size is 0: the case with remote CQ data");
	if (opts.client && (fab.info()->tx_attr->op_flags & FI_COMPLETION))
		FT_FAIL("tx_attr->op_flags has FI_COMPLETION: flags 0 would still mean a "
			"completion; the test assumes the default op_flags without it");
	const int burst = 100;

	if (opts.client) {
		ctl.sync("posted");
		FT_POST(zero_len(ep, peer, T + 1));
		FT_POST(zero_len(ep, peer, T + 2));
		ctl.sync("received 1, 2");
		FT_POST(zero_len(ep, peer, T + 3));
		if (sas)
			FT_POST(zero_len(ep, peer, marker | 3));
		ctl.notify("sent 3");
		ctl.sync("received 3");
		if (cq_data) {
			FT_POST(zero_len(ep, peer, T + 4, FI_REMOTE_CQ_DATA, nullptr, fab.cq_data(0x44)));
			ctl.sync("received 4");
		}
		for (int i = 0; i < burst; i++)
			FT_POST(zero_len(ep, peer, T + 5));
		fi_context2 last{};
		FT_POST(zero_len(ep, peer, T + 6, FI_COMPLETION, &last));
		Entry e = ep.tx().wait(&last, "the zero-length send with FI_COMPLETION");
		expect_flags(e, FI_SEND | FI_TAGGED, FI_RECV, "the zero-length send with FI_COMPLETION");
		ctl.sync("received burst");
		ep.tx().expect_empty("zero-length fi_tsendmsg with flags 0 under FI_SELECTIVE_COMPLETION "
				     "must give no completion");
		note("%d zero-length sends without FI_COMPLETION: no completion; the one with it: "
		     "one",
		     burst + 3 + (cq_data ? 1 : 0));
		self_sends(c, true);
		ctl.sync("end");
		note("sends to self (0 B, 1000 B, 1 MiB): verified");
		return 0;
	}

	/* server */
	fi_context2 r1{}, r2{};
	memset(c.buf.data(), canary, 64);
	FT_POST(fi_trecv(ep, c.buf.data(), 16, c.buf.desc(), FI_ADDR_UNSPEC, T + 1, 0, &r1));
	FT_POST(fi_trecv(ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, T + 2, 0, &r2));
	ctl.sync("posted");
	c.check_zero(ep.rx().wait(&r1, "zero-length into 16 B"), T + 1, peer, "zero-length into 16 B");
	c.check_zero(ep.rx().wait(&r2, "zero-length into NULL/0"), T + 2, peer,
		     "zero-length into a NULL, 0-byte receive");
	FT_EXPECT_BYTES(c.buf.data(), 64, canary, "the 16 B receive of a zero-length message");
	ctl.sync("received 1, 2");

	ctl.await("sent 3");
	if (sas) {
		fi_context2 m{};
		FT_POST(fi_trecv(ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, marker | 3, 0, &m));
		ep.rx().wait(&m, "the marker");
	}
	fi_context2 r3{};
	FT_POST(fi_trecv(ep, c.buf.data(), 16, c.buf.desc(), FI_ADDR_UNSPEC, T + 3, 0, &r3));
	c.check_zero(ep.rx().wait(&r3, "unexpected zero-length"), T + 3, peer,
		     "unexpected zero-length message");
	ctl.sync("received 3");

	if (cq_data) {
		fi_context2 r4{};
		FT_POST(fi_trecv(ep, c.buf.data(), 16, c.buf.desc(), FI_ADDR_UNSPEC, T + 4, 0, &r4));
		c.check_zero(ep.rx().wait(&r4, "zero-length with data"), T + 4, peer,
			     "zero-length with FI_REMOTE_CQ_DATA", true, fab.cq_data(0x44));
		ctl.sync("received 4");
	}

	std::vector<fi_context2> rb(burst + 1);
	for (int i = 0; i <= burst; i++)
		FT_POST(fi_trecv(ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, i < burst ? T + 5 : T + 6, 0,
				  &rb[size_t(i)]));
	for (int i = 0; i <= burst; i++) {
		std::string what = "zero-length burst message " + std::to_string(i);
		c.check_zero(ep.rx().wait(&rb[size_t(i)], what), i < burst ? T + 5 : T + 6, peer, what);
	}
	ctl.sync("received burst");
	note("%d zero-length messages (posted, NULL receive, unexpected%s, burst) received",
	     burst + 4 + (cq_data ? 1 : 0), cq_data ? ", with data" : "");
	self_sends(c, false);
	ctl.sync("end");
	note("sends to self (0 B, 1000 B, 1 MiB): verified");
	return 0;
}
