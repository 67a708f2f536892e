/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_rdm_rma: RMA of any size, with a target that only reads its CQ.
 *
 * The server registers a 17 MiB region (FI_REMOTE_READ|FI_REMOTE_WRITE) holding a known
 * pattern, posts one receive for the client's final "done" message (and, when the mode
 * has FI_RX_CQ_DATA, one receive per write with remote CQ data), sends the region's key
 * and address, and from then on does nothing but read its receive CQ until the "done"
 * message: every byte the client writes there, and every byte it reads, moves by the
 * target's manual progress alone (FI_PROGRESS_MANUAL: fi_cq_read is the only call).
 *
 * The client runs, at sizes 1, 7, 64, 4095, 4096, 8193, 65539, 1 MiB, 4 MiB + 5 and
 * 16 MiB (clamped to max_msg_size), at odd offsets: fi_write, fi_writev (up to 4 iovs),
 * fi_writemsg(FI_DELIVERY_COMPLETE) over 2 remote iovs (rma_iov_limit allowing),
 * fi_writedata, fi_writemsg(FI_REMOTE_CQ_DATA|FI_DELIVERY_COMPLETE), fi_inject_write and
 * fi_inject_writedata (up to inject_size), fi_read, fi_readv, fi_readmsg. It keeps a
 * model of the region:
 *   - reads: the local bytes equal the model's range, the bytes around them untouched;
 *   - writes: read back at once after an FI_DELIVERY_COMPLETE write (or with
 *     FI_ORDER_RAW) must equal the data; after other writes the read back is repeated
 *     until it does, within the bound (a transmit completion does not promise
 *     visibility); the neighbouring bytes are read too and must equal the model;
 *   - initiator entries: op_context, FI_RMA|FI_WRITE or FI_RMA|FI_READ; injects none.
 * The server, after "done": one entry per write with data, each with FI_REMOTE_CQ_DATA
 * and FI_REMOTE_WRITE and a distinct expected value (in any order), nothing else; then
 * its region equals the model it computes independently (every byte).
 */
#include "common/ft_rdm.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace ft;
using namespace ft::rdm;

namespace {

enum Op {
	WRITE, WRITEV, WRITEMSG_DC, WRITEDATA, WRITEMSG_DATA_DC, INJECT_WRITE, INJECT_WRITEDATA,
	READ, READV, READMSG, N_OP
};
const char *const names[] = {"fi_write",
			     "fi_writev",
			     "fi_writemsg(FI_DELIVERY_COMPLETE)",
			     "fi_writedata",
			     "fi_writemsg(FI_REMOTE_CQ_DATA|FI_DELIVERY_COMPLETE)",
			     "fi_inject_write",
			     "fi_inject_writedata",
			     "fi_read",
			     "fi_readv",
			     "fi_readmsg"};
bool is_read(Op op) { return op >= READ; }
bool is_inject(Op op) { return op == INJECT_WRITE || op == INJECT_WRITEDATA; }
bool has_data(Op op) { return op == WRITEDATA || op == WRITEMSG_DATA_DC || op == INJECT_WRITEDATA; }
bool is_dc(Op op) { return op == WRITEMSG_DC || op == WRITEMSG_DATA_DC; }

constexpr size_t region = (17u << 20);
constexpr uint32_t region_seed = 77;
constexpr size_t lgap = 64; /* canary bytes around local data and between local iovs */

struct Case {
	Op op;
	size_t len, off;
	uint32_t seed;
	uint64_t data;
	std::string name;
};

std::vector<Case> plan(const Fabric &fab)
{
	std::vector<size_t> sizes{1, 7, 64, 4095, 4096, 8193, 65539, 1u << 20, (4u << 20) + 5,
				  16u << 20};
	std::erase_if(sizes, [&](size_t s) { return s > fab.max_msg_size(); });
	std::vector<Case> out;
	int k = 0;
	for (size_t len : sizes) {
		for (int o = 0; o < N_OP; o++) {
			Op op = Op(o);
			if (is_inject(op) && len > fab.inject_size())
				continue;
			if (has_data(op) && fab.cq_data_size() == 0)
				continue;
			Case c;
			c.op = op;
			c.len = len;
			c.off = (size_t(k) * 409903 + 13) % (region - len + 1);
			c.seed = uint32_t(5000 + k);
			c.data = fab.cq_data(0xc0da000000000000ull + uint64_t(k));
			c.name = std::string(names[o]) + ", " + size_str(len) + " at offset " +
				 std::to_string(c.off);
			out.push_back(c);
			k++;
		}
	}
	return out;
}

/* The region after the plan's writes. */
void apply_write(std::vector<uint8_t> &model, const Case &c)
{
	if (!is_read(c.op))
		fill_pattern(model.data() + c.off, c.len, c.seed);
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv,
		      "RMA writes and reads 1 B .. 16 MiB; the target only reads its CQ");
	Fabric fab(FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MSG |
		   FI_SEND | FI_RECV);
	Ctl ctl;
	fab.agree(ctl); /* the limits both sides share (two providers: EFA_FT_INTEROP) */
	Endpoint ep(fab, ep_spec(fab));
	fi_addr_t peer = ctl.exchange_names(fab, ep);
	std::vector<Case> cases = plan(fab);
	size_t n_data = 0;
	for (auto &c : cases)
		n_data += has_data(c.op);
	if (fab.cq_data_size() == 0)
		skip_part("cq_data_size is 0: no writes with remote CQ data");
	if (fab.inject_size() == 0)
		skip_part("inject_size is 0: no inject writes");

	std::vector<uint8_t> model(region);
	fill_pattern(model.data(), region, region_seed);

	if (opts.server) {
		Buffer target(fab, region, FI_REMOTE_READ | FI_REMOTE_WRITE);
		memcpy(target.data(), model.data(), region);
		Buffer done_buf(fab, 4096);
		fi_context2 done_ctx{};
		FT_POST(fi_recv(ep, done_buf.data(), 64, done_buf.desc(), FI_ADDR_UNSPEC, &done_ctx));
		/* FI_RX_CQ_DATA: each write with data consumes a posted receive. */
		const bool rx_cq_data = fab.rx_cq_data();
		std::vector<fi_context2> data_ctx(rx_cq_data ? n_data : 0);
		for (auto &c : data_ctx)
			FT_POST(fi_recv(ep, done_buf.data() + 1024, 0, done_buf.desc(), FI_ADDR_UNSPEC,
					 &c));
		ctl.send_mr(target);
		ctl.sync("ready");

		/* From here: only the CQ read loop. */
		std::multiset<uint64_t> got;
		bool done = false;
		while (!done) {
			Entry e = ep.rx().next("the target's CQ");
			FT_CHECK(!e.error, "target: %s", e.describe().c_str());
			if (e.ctx == &done_ctx) {
				FT_CHECK(e.len == 8, "the done message has %zu bytes", e.len);
				done = true;
				continue;
			}
			bool from_rx = std::any_of(data_ctx.begin(), data_ctx.end(),
						   [&](fi_context2 &c) { return e.ctx == &c; });
			FT_CHECK(e.flags & FI_REMOTE_CQ_DATA,
				 "target: an entry that is neither the done message nor remote CQ "
				 "data: %s (RMA without data must leave the target's CQ empty)",
				 e.describe().c_str());
			expect_flags(e, FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE, FI_SEND | FI_READ,
				     "target: write with remote CQ data");
			FT_CHECK(rx_cq_data ? from_rx : true, "target: entry %s did not consume a "
							      "posted receive under FI_RX_CQ_DATA",
				 e.describe().c_str());
			got.insert(e.data);
		}
		uint64_t sent_count;
		memcpy(&sent_count, done_buf.data(), 8);
		FT_CHECK(sent_count == cases.size(), "done message says %llu operations, planned %zu",
			 (unsigned long long)sent_count, cases.size());
		std::multiset<uint64_t> want;
		for (auto &c : cases) {
			apply_write(model, c);
			if (has_data(c.op))
				want.insert(c.data);
		}
		FT_CHECK(got == want, "target: %zu remote CQ data entries, expected %zu (or the "
				      "values differ)",
			 got.size(), want.size());
		/* Every byte of the region (polled: writes may become visible after the done
		 * message arrives, which is ordered only by FI_ORDER_WAS if at all). */
		Deadline deadline;
		while (memcmp(target.data(), model.data(), region) && !deadline.expired())
			progress_all();
		for (size_t i = 0; i < region; i++)
			if (target.data()[i] != model[i])
				FT_FAIL("target region byte %zu is 0x%02x, the model says 0x%02x", i,
					target.data()[i], model[i]);
		ep.rx().expect_empty("target: nothing after the done message");
		ep.tx().expect_empty("target: it sent nothing");
		ctl.sync("verified");
		note("target: %zu operations, %zu remote CQ data entries, the 17 MiB region "
		     "verified; the target only read its CQ meanwhile",
		     cases.size(), got.size());
		return 0;
	}

	/* client: the initiator */
	RemoteMr rmr = ctl.recv_mr();
	ctl.sync("ready");
	const size_t max_len = 16u << 20;
	Buffer local(fab, max_len + 8 * lgap + 4096);
	Buffer check(fab, max_len + 2 * 4096 + 4096);
	const bool raw = has_order(fab, FI_ORDER_RAW);
	const int niov = int(std::min<size_t>(4, fab.tx_iov_limit()));
	const size_t nrma = std::min<size_t>(2, fab.info()->tx_attr->rma_iov_limit);
	int retried = 0;

	/* Reads [off, off + len) of the target into `check` (at offset 0), waits. */
	auto read_back = [&](size_t off, size_t len, const std::string &what) {
		fi_context2 ctx{};
		FT_POST(fi_read(ep, check.data(), len, check.desc(), peer, rmr.at(off), rmr.key, &ctx));
		Entry e = ep.tx().wait(&ctx, what + " (read back)");
		expect_flags(e, FI_RMA | FI_READ, FI_WRITE, what + " (read back)");
	};

	for (const Case &c : cases) {
		debug("case %s", c.name.c_str());
		fi_context2 ctx{};
		/* Local layout: n pieces with lgap canary bytes between, from offset lgap. */
		int n = (c.op == WRITEV || c.op == READV) ? std::min<int>(niov, int(std::max<size_t>(c.len, 1))) : 1;
		std::vector<iovec> iov;
		std::vector<void *> desc;
		size_t at = lgap, left = c.len;
		for (int i = 0; i < n; i++) {
			size_t part = i == n - 1 ? left : c.len / size_t(n) + size_t(i);
			part = std::min(part, left);
			iov.push_back({local.data() + at, part});
			desc.push_back(local.desc());
			at += part + lgap;
			left -= part;
		}
		const size_t extent = at;
		memset(local.data(), canary, extent);
		fi_rma_iov rma[2];
		size_t nr = (c.op == WRITEMSG_DC || c.op == WRITEMSG_DATA_DC || c.op == READMSG) && c.len >= 2 ? nrma : 1;
		size_t h = nr == 2 ? c.len / 2 : c.len;
		rma[0] = {rmr.at(c.off), h, rmr.key};
		rma[1] = {rmr.at(c.off + h), c.len - h, rmr.key};
		fi_msg_rma msg{iov.data(), desc.data(), iov.size(), peer, rma, nr, &ctx, c.data};

		if (!is_read(c.op)) {
			size_t k = 0;
			for (auto &v : iov) {
				fill_pattern(v.iov_base, v.iov_len, c.seed, k);
				k += v.iov_len;
			}
			void *p = iov[0].iov_base;
			switch (c.op) {
			case WRITE:
				FT_POST(fi_write(ep, p, c.len, local.desc(), peer, rmr.at(c.off), rmr.key,
						  &ctx));
				break;
			case WRITEV:
				FT_POST(fi_writev(ep, iov.data(), desc.data(), iov.size(), peer,
						   rmr.at(c.off), rmr.key, &ctx));
				break;
			case WRITEMSG_DC: FT_POST(fi_writemsg(ep, &msg, FI_DELIVERY_COMPLETE)); break;
			case WRITEDATA:
				FT_POST(fi_writedata(ep, p, c.len, local.desc(), c.data, peer,
						      rmr.at(c.off), rmr.key, &ctx));
				break;
			case WRITEMSG_DATA_DC:
				FT_POST(fi_writemsg(ep, &msg, FI_REMOTE_CQ_DATA | FI_DELIVERY_COMPLETE));
				break;
			case INJECT_WRITE:
				FT_POST(fi_inject_write(ep, p, c.len, peer, rmr.at(c.off), rmr.key));
				break;
			case INJECT_WRITEDATA:
				FT_POST(fi_inject_writedata(ep, p, c.len, c.data, peer, rmr.at(c.off),
							     rmr.key));
				break;
			default: break;
			}
			if (is_inject(c.op)) {
				memset(p, 0, c.len); /* the buffer is ours again */
			} else {
				Entry e = ep.tx().wait(&ctx, c.name);
				expect_flags(e, FI_RMA | FI_WRITE, FI_READ | FI_RECV, c.name);
			}
			apply_write(model, c);
			/* Read back the range and up to 64 bytes on each side. */
			size_t lo = c.off >= 64 ? c.off - 64 : 0;
			size_t hi = std::min(region, c.off + c.len + 64);
			bool once = is_dc(c.op) || raw;
			Deadline deadline;
			for (;;) {
				read_back(lo, hi - lo, c.name);
				if (!memcmp(check.data(), model.data() + lo, hi - lo))
					break;
				if (once || deadline.expired()) {
					for (size_t i = 0; i < hi - lo; i++)
						if (check.data()[i] != model[lo + i])
							FT_FAIL("%s: target byte %zu (%s) reads 0x%02x, "
								"expected 0x%02x%s",
								c.name.c_str(), lo + i,
								lo + i < c.off ? "before the range"
								: lo + i >= c.off + c.len ? "after the range"
											  : "in the range",
								check.data()[i], model[lo + i],
								once ? (is_dc(c.op)
										? " (after an FI_DELIVERY_COMPLETE "
										  "completion)"
										: " (with FI_ORDER_RAW)")
								     : "");
				}
				retried++;
			}
		} else {
			switch (c.op) {
			case READ:
				FT_POST(fi_read(ep, iov[0].iov_base, c.len, local.desc(), peer,
						 rmr.at(c.off), rmr.key, &ctx));
				break;
			case READV:
				FT_POST(fi_readv(ep, iov.data(), desc.data(), iov.size(), peer,
						  rmr.at(c.off), rmr.key, &ctx));
				break;
			case READMSG: FT_POST(fi_readmsg(ep, &msg, 0)); break;
			default: break;
			}
			Entry e = ep.tx().wait(&ctx, c.name);
			expect_flags(e, FI_RMA | FI_READ, FI_WRITE | FI_RECV, c.name);
			size_t k = 0;
			size_t prev_end = 0;
			for (auto &v : iov) {
				auto *p = static_cast<uint8_t *>(v.iov_base);
				FT_EXPECT_BYTES(local.data() + prev_end, size_t(p - local.data()) - prev_end,
						canary, (c.name + ": before/between the local iovs").c_str());
				for (size_t i = 0; i < v.iov_len; i++)
					if (p[i] != model[c.off + k + i])
						FT_FAIL("%s: local byte %zu reads 0x%02x, the target has "
							"0x%02x",
							c.name.c_str(), k + i, p[i], model[c.off + k + i]);
				k += v.iov_len;
				prev_end = size_t(p - local.data()) + v.iov_len;
			}
			FT_EXPECT_BYTES(local.data() + prev_end, lgap, canary,
					(c.name + ": after the data").c_str());
		}
		if (is_inject(c.op))
			ep.tx().expect_empty(c.name + ": an inject generates no completion");
	}
	uint64_t count = cases.size();
	Buffer msgbuf(fab, 64);
	memcpy(msgbuf.data(), &count, 8);
	fi_context2 dctx{};
	FT_POST(fi_send(ep, msgbuf.data(), 8, msgbuf.desc(), peer, &dctx));
	ep.tx().wait(&dctx, "the done message");
	ctl.sync("verified");
	note("initiator: %zu operations verified (writes read back%s; %d read-backs repeated "
	     "until visible)",
	     cases.size(), raw ? ", with FI_ORDER_RAW" : "", retried);
	return 0;
}
