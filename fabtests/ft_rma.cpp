/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_rma: every RMA call, the client acting on two regions the server registered:
 * fi_write, fi_writev, fi_writemsg, fi_writedata, fi_inject_write, fi_inject_writedata
 * into one, fi_read, fi_readv, fi_readmsg from the other, at sizes 1, inject_size,
 * inject_size + 1, 4 KiB, 8928, 64 KiB, 1 MiB and 4 MiB (clamped to max_msg_size), at
 * offsets that are not multiples of anything. Remote addresses are virtual addresses
 * under FI_MR_VIRT_ADDR, offsets otherwise; keys are fi_mr_key's.
 *
 * Checked for each operation:
 *   - writes: the target range holds the client's pattern (polled until visible, within
 *     the bound: a transmit completion does not promise visibility) and every other
 *     byte of the region is unchanged; reads: the local range holds the server's
 *     pattern and nothing after it changed (readv: across both iovs);
 *   - the initiator's completion: its context and FI_RMA|FI_WRITE or FI_RMA|FI_READ;
 *     inject calls: the buffer is overwritten at once and no completion appears;
 *   - the *writedata calls: the target's CQ entry has FI_REMOTE_CQ_DATA|FI_REMOTE_WRITE
 *     and the value (with FI_RX_CQ_DATA in the mode, the server posts a receive first,
 *     and the entry completes it); the other writes and the reads leave the target's CQ
 *     empty (no FI_RMA_EVENT was requested).
 */
#include "common/ft_oob.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using namespace ft;

namespace {

enum Op {
	WRITE, WRITEV, WRITEMSG, WRITEDATA, INJECT_WRITE, INJECT_WRITEDATA,
	READ, READV, READMSG, N_OP
};
const char *const op_names[] = {"fi_write",	    "fi_writev",	   "fi_writemsg",
				"fi_writedata",	    "fi_inject_write",	   "fi_inject_writedata",
				"fi_read",	    "fi_readv",		   "fi_readmsg"};

bool is_read(int op) { return op >= READ; }
bool is_inject(int op) { return op == INJECT_WRITE || op == INJECT_WRITEDATA; }
bool has_data(int op) { return op == WRITEDATA || op == INJECT_WRITEDATA; }
bool is_vector(int op) { return op == WRITEV || op == READV; }

constexpr uint32_t region_seed = 77;

struct Case {
	int op;
	size_t len;
	size_t off;
	uint32_t seed;
	std::string name;
};

std::vector<Case> cases(const Fabric &fab, size_t region)
{
	std::vector<size_t> sizes{1, fab.inject_size(), fab.inject_size() + 1, 4096, 8928,
				  65536, size_t(1) << 20, region};
	std::erase_if(sizes, [&](size_t s) { return s == 0 || s > region; });
	std::sort(sizes.begin(), sizes.end());
	sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
	std::vector<Case> out;
	const bool inject = !known_broken(fab, "fi_inject_write up to inject_size");
	for (size_t len : sizes) {
		for (int op = 0; op < N_OP; op++) {
			if (is_inject(op) && (len > fab.inject_size() || !inject))
				continue;
			if (has_data(op) && fab.cq_data_size() == 0)
				continue;
			size_t k = out.size();
			size_t off = region > len ? (k * 4099 + 3) % (region - len + 1) : 0;
			std::string name = std::string(op_names[op]) + ", " + std::to_string(len) +
					   " bytes at offset " + std::to_string(off);
			out.push_back({op, len, off, uint32_t(2000 + k), name});
		}
	}
	return out;
}

void server(const Fabric &fab, Oob &oob, Endpoint &ep, size_t region)
{
	Buffer src(fab, region, fab.local_access() | FI_REMOTE_READ);
	Buffer dst(fab, region, fab.local_access() | FI_REMOTE_WRITE);
	Buffer rbuf(fab, 64); /* receives completed by remote CQ data under FI_RX_CQ_DATA */
	fill_pattern(src.data(), region, region_seed);
	oob.send_mr(src);
	oob.send_mr(dst);

	for (const Case &c : cases(fab, region)) {
		const char *what = c.name.c_str();
		fi_context2 rctx{};
		bool posted = has_data(c.op) && fab.rx_cq_data();
		if (posted)
			FT_POST(fi_recv(ep, rbuf.data(), rbuf.size(), rbuf.desc(), FI_ADDR_UNSPEC,
					&rctx));
		oob.sync(("ready " + c.name).c_str());
		oob.sync(("done " + c.name).c_str());

		if (has_data(c.op)) {
			Completion cc =
				posted ? ep.rx().wait(&rctx, what) : ep.rx().wait_next(what);
			uint64_t want = fab.cq_data(0xda7a0000u + c.seed);
			FT_CHECK((cc.flags & (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE)) ==
					 (FI_REMOTE_CQ_DATA | FI_REMOTE_WRITE),
				 "%s: target completion flags %s", what,
				 flags_str(cc.flags).c_str());
			FT_CHECK(cc.data == want,
				 "%s: target completion data 0x%llx, expected 0x%llx", what,
				 (unsigned long long)cc.data, (unsigned long long)want);
		}
		if (!is_read(c.op)) {
			uint8_t *p = dst.data() + c.off;
			FT_AWAIT_PATTERN(p, c.len, c.seed, 0, what);
			FT_EXPECT_BYTES(dst.data(), c.off, canary,
					(c.name + ": bytes before").c_str());
			FT_EXPECT_BYTES(p + c.len, region - c.off - c.len, canary,
					(c.name + ": bytes after").c_str());
			memset(p, canary, c.len);
		}
		ep.rx().expect_empty((c.name + ": no other target completion").c_str());
		oob.sync(("verified " + c.name).c_str());
	}
	FT_EXPECT_PATTERN(src.data(), region, region_seed, 0, "the region read from (unchanged)");
}

void client(const Fabric &fab, Oob &oob, Endpoint &ep, fi_addr_t peer, size_t region)
{
	RemoteMr src = oob.recv_mr();
	RemoteMr dst = oob.recv_mr();
	FT_CHECK(src.len == region && dst.len == region, "regions of %llu and %llu bytes",
		 (unsigned long long)src.len, (unsigned long long)dst.len);
	Buffer a(fab, region), b(fab, region);

	for (const Case &c : cases(fab, region)) {
		const char *what = c.name.c_str();
		const size_t n = c.len;
		/* v calls: the first half through a, the rest through b. */
		size_t h = (is_vector(c.op) && fab.tx_iov_limit() >= 2 && n >= 2) ? n / 2 : n;
		if (is_read(c.op)) {
			memset(a.data(), canary, region);
			memset(b.data(), canary, region);
		} else {
			fill_pattern(a.data(), h, c.seed, 0);
			fill_pattern(b.data(), n - h, c.seed, h);
		}
		const RemoteMr &r = is_read(c.op) ? src : dst;
		const uint64_t addr = r.at(c.off);
		const uint64_t data = fab.cq_data(0xda7a0000u + c.seed);
		fi_context2 ctx{};
		iovec iov[2] = {{a.data(), h}, {b.data(), n - h}};
		void *desc[2] = {a.desc(), b.desc()};
		size_t iovs = h < n ? 2 : 1;
		fi_rma_iov riov{addr, n, r.key};
		fi_msg_rma msg{iov, desc, 1, peer, &riov, 1, &ctx, 0};
		oob.sync(("ready " + c.name).c_str());

		switch (c.op) {
		case WRITE:
			FT_POST(fi_write(ep, a.data(), n, a.desc(), peer, addr, r.key, &ctx));
			break;
		case WRITEV:
			FT_POST(fi_writev(ep, iov, desc, iovs, peer, addr, r.key, &ctx));
			break;
		case WRITEMSG: FT_POST(fi_writemsg(ep, &msg, 0)); break;
		case WRITEDATA:
			FT_POST(fi_writedata(ep, a.data(), n, a.desc(), data, peer, addr, r.key,
					     &ctx));
			break;
		case INJECT_WRITE:
			FT_POST(fi_inject_write(ep, a.data(), n, peer, addr, r.key));
			break;
		case INJECT_WRITEDATA:
			FT_POST(fi_inject_writedata(ep, a.data(), n, data, peer, addr, r.key));
			break;
		case READ:
			FT_POST(fi_read(ep, a.data(), n, a.desc(), peer, addr, r.key, &ctx));
			break;
		case READV: FT_POST(fi_readv(ep, iov, desc, iovs, peer, addr, r.key, &ctx)); break;
		case READMSG: FT_POST(fi_readmsg(ep, &msg, 0)); break;
		}
		if (is_inject(c.op)) {
			memset(a.data(), 0, n); /* the buffer is ours again at return */
		} else {
			Completion cc = ep.tx().wait(&ctx, what);
			uint64_t want = FI_RMA | (is_read(c.op) ? FI_READ : FI_WRITE);
			FT_CHECK((cc.flags & want) == want, "%s: completion flags %s", what,
				 flags_str(cc.flags).c_str());
		}
		if (is_read(c.op)) {
			FT_EXPECT_PATTERN(a.data(), h, region_seed, c.off, what);
			FT_EXPECT_PATTERN(b.data(), n - h, region_seed, c.off + h, what);
			FT_EXPECT_BYTES(a.data() + h, region - h, canary,
					(c.name + ": after").c_str());
			FT_EXPECT_BYTES(b.data() + n - h, region - (n - h), canary,
					(c.name + ": after").c_str());
		}
		oob.sync(("done " + c.name).c_str());
		oob.sync(("verified " + c.name).c_str());
		if (is_inject(c.op))
			ep.tx().expect_empty((c.name + " generates no completion").c_str());
	}
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "every RMA call at sizes from 1 byte to 4 MiB");
	Fabric fab(FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	Oob oob;
	Endpoint ep(fab);
	fi_addr_t peer = oob.exchange_names(fab, ep);
	size_t region = std::min<size_t>(size_t(4) << 20, fab.max_msg_size());
	if (fab.cq_data_size() == 0)
		note("cq_data_size is 0: fi_writedata and fi_inject_writedata are not tested");
	if (opts.server)
		server(fab, oob, ep, region);
	else
		client(fab, oob, ep, peer, region);
	note("%zu RMA operations verified (%s addressing)", cases(fab, region).size(),
	     fab.virt_addr() ? "virtual address" : "offset");
	oob.sync("end");
	return 0;
}
