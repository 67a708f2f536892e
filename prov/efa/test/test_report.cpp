/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Hang reports and statistics (fi_efa(7), STATISTICS AND REPORTS), through libfabric's
 * public API on the software device:
 *
 *   - an endpoint leaves a receive unmatched (tag 0x5eed) and starts a 1 MiB send to a
 *     peer endpoint that never makes progress (so no CTS ever comes); the signal of
 *     FI_EFA_REPORT_SIGNAL makes its next fi_cq_read write a report to
 *     FI_EFA_REPORT_PATH, which names both, with what each waits for, and the silent
 *     peer; the report call of FI_EFA_STATS_OPS writes one too;
 *   - the counters of FI_EFA_STATS_OPS: packets by type each way, protocol choices,
 *     operations in progress, per peer packets and flags, after a known exchange;
 *   - FI_EFA_REPORT_AT_CLOSE: closing with the send still waiting writes a report.
 */
#include "fitest.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_tagged.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using fitest::Side;
using fitest::close_side;

fi_info *g_info;
fid_fabric *g_fab;
Side g_a, g_b;
std::string g_path;

void setup()
{
	g_path = "/tmp/efa_report_test." + std::to_string(getpid());
	unlink(g_path.c_str());
	setenv("FI_EFA_REPORT_PATH", (g_path + ".%p").c_str(), 1);
	g_path += "." + std::to_string(getpid());
	setenv("FI_EFA_REPORT_SIGNAL", "SIGUSR2", 1);
	setenv("FI_EFA_REPORT_AGE", "0", 1);
	fitest::use_provider();
	setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 1);
	g_info = fitest::getinfo("efa", FI_TAGGED);
	fitest::open_fabric(g_info, &g_fab);
	fitest::open_pair(g_fab, g_info, g_a, g_b);
}

void teardown()
{
	fi_close(&g_fab->fid);
	fi_freeinfo(g_info);
	unlink(g_path.c_str());
}

std::string read_report()
{
	std::ifstream f(g_path);
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

fi_efa_ops_stats *stats_ops(fid_ep *ep)
{
	fi_efa_ops_stats *ops = nullptr;
	cr_assert_eq(fi_open_ops(&ep->fid, FI_EFA_STATS_OPS, 0, reinterpret_cast<void **>(&ops), nullptr), 0);
	cr_assert_not_null(ops);
	cr_assert_geq(ops->size, sizeof(fi_efa_ops_stats));
	return ops;
}

/* One message a -> b, both completions read. */
void exchange_one(size_t len)
{
	std::vector<uint8_t> out(len, 7), in(len);
	cr_assert_eq(fi_trecv(g_b.ep, in.data(), len, nullptr, g_b.peer, 1, 0, nullptr), 0);
	ssize_t r;
	while ((r = fi_tsend(g_a.ep, out.data(), len, nullptr, g_a.peer, 1, nullptr)) == -FI_EAGAIN) {
		fi_cq_tagged_entry e;
		fi_cq_read(g_b.cq, &e, 1);
	}
	cr_assert_eq(r, 0);
	int done = 0;
	for (int i = 0; i < 10000000 && done < 2; i++) {
		fi_cq_tagged_entry e;
		done += fi_cq_read(g_a.cq, &e, 1) == 1;
		done += fi_cq_read(g_b.cq, &e, 1) == 1;
	}
	cr_assert_eq(done, 2, "the exchange did not complete");
	cr_assert(in == out);
}

} // namespace

TestSuite(report, .init = setup, .fini = teardown, .timeout = 60);

Test(report, names_the_unmatched_receive_and_the_send_to_a_silent_peer)
{
	exchange_one(64); /* a and b know each other */
	std::vector<uint8_t> rbuf(64), big(1 << 20, 1);
	cr_assert_eq(fi_trecv(g_a.ep, rbuf.data(), rbuf.size(), nullptr, FI_ADDR_UNSPEC, 0x5eed, 0, nullptr), 0);
	/* b never reads its CQ from here on: no CTS and no data move. */
	cr_assert_eq(fi_tsend(g_a.ep, big.data(), big.size(), nullptr, g_a.peer, 0x77, nullptr), 0);
	fi_cq_tagged_entry e;
	for (int i = 0; i < 100; i++)
		cr_assert_eq(fi_cq_read(g_a.cq, &e, 1), -FI_EAGAIN);
	cr_assert_eq(raise(SIGUSR2), 0);
	cr_assert_eq(fi_cq_read(g_a.cq, &e, 1), -FI_EAGAIN); /* its progress writes the report */
	const std::string rep = read_report();
	cr_assert(rep.find("efa report (signal)") != std::string::npos, "no report after the signal:\n%s", rep.c_str());
	cr_assert(rep.find("receive posted, unmatched: 64 bytes, tag 0x5eed") != std::string::npos,
		  "the unmatched receive is not named:\n%s", rep.c_str());
	cr_assert(rep.find("tagged send of 1048576 bytes to") != std::string::npos &&
			  rep.find("tag 0x77") != std::string::npos,
		  "the send is not named:\n%s", rep.c_str());
	cr_assert(rep.find("waiting for") != std::string::npos, "what the send waits for is missing:\n%s", rep.c_str());
	cr_assert(rep.find("1 operations to it") != std::string::npos, "the silent peer is not listed:\n%s",
		  rep.c_str());

	/* The same through the API, appended. */
	fi_efa_ops_stats *ops = stats_ops(g_a.ep);
	cr_assert_eq(ops->report(g_a.ep, 0), 0);
	const std::string rep2 = read_report();
	cr_assert(rep2.find("efa report (asked by the application)") != std::string::npos);
	fi_efa_ep_stats st{};
	cr_assert_eq(ops->query_ep(g_a.ep, &st, sizeof st), ssize_t(sizeof st));
	cr_assert_eq(st.reports, 2u);
	cr_assert_eq(st.tx_ops, 1u);
	cr_assert_eq(st.rx_ops, 1u);
	close_side(g_a);
	close_side(g_b);
}

Test(report, counters_after_a_known_exchange)
{
	exchange_one(64);
	exchange_one(200000); /* beyond medium: long-CTS or long-read */
	fi_efa_ops_stats *ops = stats_ops(g_a.ep);
	fi_efa_ep_stats a{}, b{};
	cr_assert_eq(ops->query_ep(g_a.ep, &a, sizeof a), ssize_t(sizeof a));
	cr_assert_eq(ops->query_ep(g_b.ep, &b, sizeof b), ssize_t(sizeof b));
	cr_assert_eq(a.send_eager, 1u);
	cr_assert_eq(a.send_longcts + a.send_longread, 1u);
	cr_assert_eq(a.tx_ops, 0u);
	cr_assert_eq(b.rx_ops, 0u);
	cr_assert_geq(a.tx_pkts[9], 1u, "HANDSHAKE sent");  /* type 9: HANDSHAKE */
	cr_assert_geq(b.rx_pkts[65], 1u, "EAGER_TAGRTM received"); /* type 65 */
	cr_assert_eq(a.tx_pkts[65], b.rx_pkts[65]);
	uint64_t out = 0, in = 0;
	for (int t = 0; t < FI_EFA_PKT_TYPES; t++) {
		out += a.tx_pkts[t];
		in += b.rx_pkts[t];
	}
	fi_efa_peer_stats p{};
	cr_assert_eq(ops->query_peer(g_a.ep, g_a.peer, &p, sizeof p), ssize_t(sizeof p));
	cr_assert_eq(p.tx_pkts, out, "per-peer packets out %lu, endpoint %lu", (unsigned long)p.tx_pkts,
		     (unsigned long)out);
	cr_assert(p.flags & FI_EFA_PEER_HANDSHAKE_RECEIVED);
	cr_assert_eq(p.tx_ops, 0u);
	cr_assert_eq(ops->query_peer(g_a.ep, g_a.peer + 7, &p, sizeof p), -FI_ENOENT);
	/* The pools keep what they made: another exchange of the same kind adds nothing. */
	cr_assert_gt(a.pool_bytes, 0u);
	cr_assert_gt(b.pool_bytes, 0u);
	exchange_one(64);
	fi_efa_ep_stats a2{};
	cr_assert_eq(ops->query_ep(g_a.ep, &a2, sizeof a2), ssize_t(sizeof a2));
	cr_assert_eq(a2.pool_bytes, a.pool_bytes, "pools grew from %lu to %lu bytes for one more exchange",
		     (unsigned long)a.pool_bytes, (unsigned long)a2.pool_bytes);
	/* A caller with an older, shorter structure gets that much. */
	cr_assert_eq(ops->query_ep(g_a.ep, &a, 16), 16);
	close_side(g_a);
	close_side(g_b);
}

void setup_at_close()
{
	setenv("FI_EFA_REPORT_AT_CLOSE", "1", 1);
	setup();
}

Test(report_close, at_close_with_operations_left, .init = setup_at_close, .fini = teardown, .timeout = 60)
{
	exchange_one(64);
	std::vector<uint8_t> big(1 << 20, 1);
	cr_assert_eq(fi_tsend(g_a.ep, big.data(), big.size(), nullptr, g_a.peer, 0x99, nullptr), 0);
	close_side(g_a);
	const std::string rep = read_report();
	cr_assert(rep.find("efa report (fi_close with operations in progress)") != std::string::npos &&
			  rep.find("tag 0x99") != std::string::npos,
		  "no report at close:\n%s", rep.c_str());
	close_side(g_b);
}

/* A sender whose packets the receiver refuses (it holds all its receive buffers for
 * unexpected messages: FI_EFA_RX_COPY_MAX) reports them queued, with the next retry. */
void setup_rnr()
{
	setenv("FI_EFA_RX_COPY_MAX", "16384", 1);
	setenv("FI_EFA_TIMEOUT_INTERVAL", "200000", 1); /* a first backoff of 200 ms */
	setup();
}

Test(report_rnr, names_packets_queued_after_receiver_not_ready, .init = setup_rnr, .fini = teardown, .timeout = 60)
{
	exchange_one(64);
	std::vector<uint8_t> src(2048, 5);
	int stuck = 0;
	size_t posted = 0;
	fi_cq_tagged_entry e;
	while (stuck < 20000 && posted < 5000) {
		if (fi_tsend(g_a.ep, src.data(), src.size(), nullptr, g_a.peer, 0x100 + posted, nullptr) == 0) {
			posted++;
			stuck = 0;
		} else {
			stuck++;
		}
		fi_cq_read(g_a.cq, &e, 1);
		cr_assert_eq(fi_cq_read(g_b.cq, &e, 1), -FI_EAGAIN);
	}
	cr_assert_lt(posted, 5000u, "the receiver never refused");
	fi_efa_ops_stats *ops = stats_ops(g_a.ep);
	cr_assert_eq(ops->report(g_a.ep, 0), 0);
	const std::string rep = read_report();
	cr_assert(rep.find("queued after receiver-not-ready, next retry in") != std::string::npos,
		  "the refused packets are not named:\n%s", rep.c_str());
	fi_efa_ep_stats st{};
	ops->query_ep(g_a.ep, &st, sizeof st);
	cr_assert_gt(st.rnr_received, 0u);
	fi_efa_ep_stats sb{};
	ops->query_ep(g_b.ep, &sb, sizeof sb);
	cr_assert_gt(sb.rx_held, 0u, "the receiver holds no buffer");
	close_side(g_a);
	close_side(g_b);
}

/* FI_EFA_REPORT_AT_CLOSE also covers an endpoint never closed: a process that exits
 * with one open and a receive posted writes its report at exit. */
Test(report_exit, at_exit_without_close, .timeout = 60)
{
	const std::string base = "/tmp/efa_report_exit." + std::to_string(getpid());
	setenv("FI_EFA_REPORT_PATH", (base + ".%p").c_str(), 1);
	setenv("FI_EFA_REPORT_AT_CLOSE", "1", 1);
	fflush(nullptr);
	const pid_t pid = fork();
	if (!pid) {
		fitest::use_provider();
		setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 1);
		fi_info *info = fitest::getinfo("efa", FI_TAGGED);
		fid_fabric *fab;
		fitest::open_fabric(info, &fab);
		Side s;
		fitest::open_side(fab, info, s);
		static uint8_t buf[64];
		if (fi_trecv(s.ep, buf, sizeof buf, nullptr, FI_ADDR_UNSPEC, 0xe817, 0, nullptr))
			_exit(3);
		exit(0); /* no fi_close */
	}
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	const std::string path = base + "." + std::to_string(pid);
	std::ifstream f(path);
	std::stringstream ss;
	ss << f.rdbuf();
	unlink(path.c_str());
	const std::string rep = ss.str();
	cr_assert(rep.find("efa report (exit with the endpoint open") != std::string::npos &&
			  rep.find("tag 0xe817") != std::string::npos,
		  "no report at exit:\n%s", rep.c_str());
}
