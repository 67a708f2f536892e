/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ft_cntr: completion counters. Each side opens one counter per event kind and binds
 * it to its endpoint (before fi_enable) with FI_SEND, FI_RECV, FI_READ, FI_WRITE and,
 * when the provider advertises FI_RMA_EVENT, FI_REMOTE_READ and FI_REMOTE_WRITE.
 *
 * The client sends 5 messages, writes 3 times and reads 4 times; the server's counters
 * must reach 5 receives (and 3 remote writes, 4 remote reads with FI_RMA_EVENT), the
 * client's 5 sends, 3 writes, 4 reads: exactly, reached through fi_cntr_wait, and the
 * other counters must not move. Then on every counter: fi_cntr_wait beyond the value
 * times out (after about its timeout, with a negative errno), fi_cntr_add, fi_cntr_set,
 * fi_cntr_readerr (0), fi_cntr_adderr, fi_cntr_seterr.
 */
#include "common/ft_oob.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

using namespace ft;

namespace {

constexpr uint64_t n_send = 5, n_write = 3, n_read = 4;

struct Counter {
	const char *name;
	uint64_t bind;
	Fid<fid_cntr> cntr{"counter"};
	uint64_t expect = 0; /* after the traffic */
};

void open_counters(const Fabric &fab, std::vector<std::unique_ptr<Counter>> &cs)
{
	struct K {
		const char *name;
		uint64_t bind;
		bool want;
	} kinds[] = {{"send", FI_SEND, true},
		     {"recv", FI_RECV, true},
		     {"write", FI_WRITE, true},
		     {"read", FI_READ, true},
		     {"remote write", FI_REMOTE_WRITE, fab.has(FI_RMA_EVENT)},
		     {"remote read", FI_REMOTE_READ, fab.has(FI_RMA_EVENT)}};
	for (const K &k : kinds) {
		if (!k.want)
			continue;
		auto c = std::make_unique<Counter>();
		c->name = k.name;
		c->bind = k.bind;
		fi_cntr_attr attr{};
		attr.events = FI_CNTR_EVENTS_COMP;
		attr.wait_obj = FI_WAIT_UNSPEC; /* fi_cntr_wait blocks */
		FT_CALL(fi_cntr_open(fab.domain(), &attr, c->cntr.out(), nullptr));
		cs.push_back(std::move(c));
	}
}

void expect_value(Counter &c, uint64_t want, const char *when)
{
	if (want) {
		int rc = fi_cntr_wait(c.cntr, want, opts.timeout_s * 1000);
		FT_CHECK(rc == 0, "%s counter: fi_cntr_wait(%llu) returned %d (%s) %s; value %llu",
			 c.name, (unsigned long long)want, rc, fi_strerror(-rc), when,
			 (unsigned long long)fi_cntr_read(c.cntr));
	}
	uint64_t v = fi_cntr_read(c.cntr);
	FT_CHECK(v == want, "%s counter is %llu %s, expected %llu", c.name, (unsigned long long)v,
		 when, (unsigned long long)want);
	uint64_t e = fi_cntr_readerr(c.cntr);
	FT_CHECK(e == 0, "%s counter: %llu errors %s", c.name, (unsigned long long)e, when);
}

void counter_api(Counter &c, bool wait_beyond)
{
	const char *n = c.name;
	uint64_t v = fi_cntr_read(c.cntr);
	if (wait_beyond) {
		auto start = std::chrono::steady_clock::now();
		int rc = fi_cntr_wait(c.cntr, v + 1, 200);
		double ms = ms_since(start);
		FT_CHECK(rc < 0, "%s counter: fi_cntr_wait(%llu) with nothing to come returned %d", n,
			 (unsigned long long)(v + 1), rc);
		FT_CHECK(rc == -FI_ETIMEDOUT || rc == -FI_EAGAIN,
			 "%s counter: fi_cntr_wait timed out with %d (%s), expected -FI_ETIMEDOUT", n, rc,
			 fi_strerror(-rc));
		FT_CHECK(ms >= 150 && ms < 10000, "%s counter: a 200 ms fi_cntr_wait took %.0f ms", n, ms);
	}
	FT_CALL(fi_cntr_add(c.cntr, 5));
	FT_CHECK(fi_cntr_read(c.cntr) == v + 5, "%s counter: fi_cntr_add(5) gave %llu", n,
		 (unsigned long long)fi_cntr_read(c.cntr));
	FT_CALL(fi_cntr_wait(c.cntr, v + 5, 1000)); /* reached: returns at once */
	FT_CALL(fi_cntr_set(c.cntr, 0));
	FT_CHECK(fi_cntr_read(c.cntr) == 0, "%s counter: fi_cntr_set(0) gave %llu", n,
		 (unsigned long long)fi_cntr_read(c.cntr));
	FT_CALL(fi_cntr_adderr(c.cntr, 3));
	FT_CHECK(fi_cntr_readerr(c.cntr) == 3, "%s counter: fi_cntr_adderr(3) gave %llu errors", n,
		 (unsigned long long)fi_cntr_readerr(c.cntr));
	FT_CALL(fi_cntr_seterr(c.cntr, 0));
	FT_CHECK(fi_cntr_readerr(c.cntr) == 0, "%s counter: fi_cntr_seterr(0) gave %llu errors", n,
		 (unsigned long long)fi_cntr_readerr(c.cntr));
	FT_CHECK(fi_cntr_read(c.cntr) == 0, "%s counter: changed by the error calls", n);
}

} // namespace

int main(int argc, char **argv)
{
	parse_options(argc, argv, "completion counters bound to an endpoint");
	Fabric fab(FI_MSG | FI_SEND | FI_RECV | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
			   FI_REMOTE_WRITE,
		   FI_RMA_EVENT);
	std::vector<std::unique_ptr<Counter>> cs; /* before the endpoint: closed after it */
	open_counters(fab, cs);
	Oob oob;
	Endpoint ep(fab, {}, {}, [&](fid_ep *e) {
		for (auto &c : cs)
			FT_CALL(fi_ep_bind(e, &c->cntr->fid, c->bind));
	});
	fi_addr_t peer = oob.exchange_names(fab, ep);
	const size_t len = 1000;
	Buffer buf(fab, 64 * 1024, fab.local_access() | FI_REMOTE_READ | FI_REMOTE_WRITE);
	fi_context2 ctx[16]{};

	if (opts.server) {
		/* [0, 5000): receives; [8192, 11192): written; [32768, 36768): read */
		for (uint64_t i = 0; i < n_send; i++)
			FT_POST(fi_recv(ep, buf.data() + i * len, len, buf.desc(), FI_ADDR_UNSPEC,
					&ctx[i]));
		fill_pattern(buf.data() + 32768, n_read * len, 800);
		oob.send_mr(buf);
		oob.sync("posted");
		for (uint64_t i = 0; i < n_send; i++) {
			ep.rx().wait(&ctx[i], "a counted receive");
			FT_EXPECT_PATTERN(buf.data() + i * len, len, 802, 0, "a counted message");
		}
		oob.sync("traffic done");
		for (uint64_t i = 0; i < n_write; i++)
			FT_AWAIT_PATTERN(buf.data() + 8192 + i * len, len, 801, 0,
					 "a counted write");
		for (auto &c : cs) {
			c->expect = c->bind == FI_RECV		 ? n_send
				    : c->bind == FI_REMOTE_WRITE ? n_write
				    : c->bind == FI_REMOTE_READ	 ? n_read
								 : 0;
			expect_value(*c, c->expect, "at the target after the traffic");
		}
	} else {
		/* [0, 1000): sent; [1000, 2000): written; [16384, 20384): read into */
		RemoteMr r = oob.recv_mr();
		fill_pattern(buf.data(), len, 802);
		fill_pattern(buf.data() + len, len, 801);
		oob.sync("posted");
		for (uint64_t i = 0; i < n_send; i++)
			FT_POST(fi_send(ep, buf.data(), len, buf.desc(), peer, &ctx[i]));
		for (uint64_t i = 0; i < n_write; i++)
			FT_POST(fi_write(ep, buf.data() + len, len, buf.desc(), peer,
					 r.at(8192 + i * len), r.key, &ctx[n_send + i]));
		for (uint64_t i = 0; i < n_read; i++)
			FT_POST(fi_read(ep, buf.data() + 16384 + i * len, len, buf.desc(), peer,
					r.at(32768 + i * len), r.key, &ctx[n_send + n_write + i]));
		for (uint64_t i = 0; i < n_send + n_write + n_read; i++)
			ep.tx().wait(&ctx[i], "a counted operation");
		FT_EXPECT_PATTERN(buf.data() + 16384, n_read * len, 800, 0, "the counted reads");
		for (auto &c : cs) {
			c->expect = c->bind == FI_SEND ? n_send : c->bind == FI_WRITE ? n_write
							     : c->bind == FI_READ ? n_read : 0;
			expect_value(*c, c->expect, "at the initiator after the traffic");
		}
		oob.sync("traffic done");
	}
	const bool wait_beyond = !known_broken(fab, "fi_cntr_wait that has to wait");
	for (auto &c : cs)
		counter_api(*c, wait_beyond);
	note("%zu counters checked%s", cs.size(),
	     fab.has(FI_RMA_EVENT) ? "" : " (no FI_RMA_EVENT: no remote read/write counters)");
	oob.sync("end");
	return 0;
}
