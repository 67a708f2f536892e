/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Helpers for tests of the software EFA device through the raw rdma-core API.
 *
 * Tests link libefasim directly (not libibverbs), so every ibv_* / efadv_* call and
 * every verbs.h inline lands in the software device. Two-process tests fork a peer and
 * synchronise over a socketpair: messages, never sleeps.
 */
#ifndef EFA_TEST_SIMTEST_H
#define EFA_TEST_SIMTEST_H

#include "efa/efadv_compat.h"
#include "../sim/efasim.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace simtest {

/* ------------------------------------------------------------------ messaging */
class Chan {
public:
	explicit Chan(int fd = -1) : fd_(fd) {}
	template <typename T> void send(const T &v) const { send_bytes(&v, sizeof v); }
	template <typename T> T recv() const
	{
		T v;
		recv_bytes(&v, sizeof v);
		return v;
	}
	void send_bytes(const void *p, size_t n) const
	{
		const auto *b = static_cast<const uint8_t *>(p);
		while (n) {
			ssize_t r = write(fd_, b, n);
			if (r <= 0)
				_exit(90);
			b += r;
			n -= size_t(r);
		}
	}
	void recv_bytes(void *p, size_t n) const
	{
		auto *b = static_cast<uint8_t *>(p);
		while (n) {
			ssize_t r = read(fd_, b, n);
			if (r <= 0)
				_exit(91); /* the other side died */
			b += r;
			n -= size_t(r);
		}
	}
	/* A rendezvous: both sides call it; returns when both are there. */
	void sync(uint32_t tag = 0) const
	{
		send(tag);
		if (recv<uint32_t>() != tag)
			_exit(92);
	}
	int fd() const { return fd_; }

private:
	int fd_;
};

/*
 * Runs `peer` in a forked child and `self` here. The child's failures surface as its
 * exit status, which the parent asserts. Returns only after the child exited.
 */
inline void run_pair(const std::function<void(Chan &)> &self, const std::function<int(Chan &)> &peer)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		Chan c(sv[1]);
		int rc = peer(c);
		_exit(rc);
	}
	close(sv[1]);
	Chan c(sv[0]);
	self(c);
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	close(sv[0]);
	cr_assert(WIFEXITED(status), "peer process crashed (signal %d)", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	cr_assert_eq(WEXITSTATUS(status), 0, "peer process failed with status %d", WEXITSTATUS(status));
}

/* A check inside the forked peer: no Criterion there, exit with the line number. */
#define PEER_CHECK(cond)                                                                          \
	do {                                                                                      \
		if (!(cond)) {                                                                    \
			fprintf(stderr, "peer check failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			_exit(100 + (__LINE__ % 100));                                            \
		}                                                                                 \
	} while (0)

/* ------------------------------------------------------------------ addresses */
struct Addr {
	ibv_gid gid;
	uint32_t qpn;
	uint32_t qkey;
};

struct RemoteMr {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct Completion {
	uint64_t wr_id;
	ibv_wc_status status;
	uint32_t vendor_err;
	ibv_wc_opcode opcode;
	uint32_t byte_len;
	uint32_t imm;
	unsigned wc_flags;
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t slid;
	uint8_t sl;
	bool unsolicited;
	bool has_sgid;
	ibv_gid sgid;
};

/* ------------------------------------------------------------------ an SRD endpoint */
struct NodeOpts {
	int device = 0;
	uint32_t sq = 64, rq = 64;
	uint32_t inline_size = 0;
	uint16_t efa_flags = 0;
	uint8_t sl = 0;
	uint64_t wr_flags = 0;
	uint8_t rnr_retry = 7;
	uint32_t qkey = 0x1234;
	bool unsolicited_cq = false;
	bool channel = false;
	int comp_vector = 0; /* the CQ's completion vector */
	uint32_t cqe = 256;
};

/*
 * One device context, PD, CQ and QP. Memory a peer reads through the device (an RDMA
 * read target) must outlive the Node that registered it, i.e. be declared before it: the
 * device's engine may still be inside the send of a read response the peer already has
 * when the test returns (AddressSanitizer checks sendmsg's buffer after the call), until
 * the destructor closes the device.
 */
class Node {
public:
	explicit Node(const NodeOpts &o = NodeOpts()) : opts_(o)
	{
		int n = 0;
		ibv_device **list = ibv_get_device_list(&n);
		if (!list || n <= o.device)
			fail("no software EFA device");
		ctx = ibv_open_device(list[o.device]);
		ibv_free_device_list(list);
		if (!ctx)
			fail("ibv_open_device");
		pd = ibv_alloc_pd(ctx);
		if (o.channel)
			channel = ibv_create_comp_channel(ctx);
		ibv_cq_init_attr_ex ca{};
		ca.cqe = o.cqe;
		ca.wc_flags = IBV_WC_STANDARD_FLAGS;
		ca.channel = channel;
		ca.comp_vector = uint32_t(o.comp_vector);
		efadv_cq_init_attr_cur ea{};
		ea.wc_flags = EFADV_WC_EX_WITH_SGID | (o.unsolicited_cq ? EFADV_WC_EX_WITH_IS_UNSOLICITED : 0);
		cq = efadv_create_cq(ctx, &ca, reinterpret_cast<efadv_cq_init_attr *>(&ea), sizeof ea);
		if (!cq)
			fail("efadv_create_cq");
		dvcq = efadv_cq_from_ibv_cq_ex(cq);

		ibv_qp_init_attr_ex qa{};
		qa.send_cq = ibv_cq_ex_to_cq(cq);
		qa.recv_cq = ibv_cq_ex_to_cq(cq);
		qa.cap.max_send_wr = o.sq;
		qa.cap.max_recv_wr = o.rq;
		qa.cap.max_send_sge = 2;
		qa.cap.max_recv_sge = 2;
		qa.cap.max_inline_data = o.inline_size;
		qa.qp_type = IBV_QPT_DRIVER;
		qa.sq_sig_all = 1;
		qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.pd = pd;
		efadv_device_attr_cur da{};
		efadv_query_device(ctx, reinterpret_cast<efadv_device_attr *>(&da), sizeof da);
		qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
		if (da.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ)
			qa.send_ops_flags |= IBV_QP_EX_WITH_RDMA_READ;
		if (da.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE)
			qa.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
		efadv_qp_init_attr_cur qe{};
		qe.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
		qe.flags = o.efa_flags;
		qe.sl = o.sl;
		qe.wr_flags = o.wr_flags;
		qp = efadv_create_qp_ex(ctx, &qa, reinterpret_cast<efadv_qp_init_attr *>(&qe), sizeof qe);
		if (!qp)
			fail("efadv_create_qp_ex");
		qpx = ibv_qp_to_qp_ex(qp);
		cap = qa.cap;
		to_rts();
		ibv_query_gid(ctx, 1, 0, &self.gid);
		self.qpn = qp->qp_num;
		self.qkey = o.qkey;
	}

	~Node()
	{
		for (ibv_ah *a : ahs)
			ibv_destroy_ah(a);
		for (ibv_mr *m : mrs)
			ibv_dereg_mr(m);
		if (qp)
			ibv_destroy_qp(qp);
		if (cq)
			ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
		if (channel)
			ibv_destroy_comp_channel(channel);
		if (pd)
			ibv_dealloc_pd(pd);
		if (ctx)
			ibv_close_device(ctx);
	}

	Node(const Node &) = delete;
	Node &operator=(const Node &) = delete;

	[[noreturn]] static void fail(const char *what)
	{
		fprintf(stderr, "simtest: %s failed: %s\n", what, strerror(errno));
		_exit(99);
	}

	void to_rts()
	{
		ibv_qp_attr a{};
		a.qp_state = IBV_QPS_INIT;
		a.pkey_index = 0;
		a.port_num = 1;
		a.qkey = opts_.qkey;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
			fail("modify INIT");
		a = ibv_qp_attr{};
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			fail("modify RTR");
		a = ibv_qp_attr{};
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		a.rnr_retry = opts_.rnr_retry;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY))
			fail("modify RTS");
	}

	/* Trades addresses with the process at the other end of `ch` (both call it). */
	Addr exchange(const Chan &ch) const
	{
		ch.send(self);
		return ch.recv<Addr>();
	}

	ibv_ah *ah_for(const Addr &peer)
	{
		ibv_ah_attr aa{};
		aa.is_global = 1;
		aa.port_num = 1;
		aa.grh.dgid = peer.gid;
		ibv_ah *ah = ibv_create_ah(pd, &aa);
		if (!ah)
			fail("ibv_create_ah");
		ahs.push_back(ah);
		return ah;
	}

	ibv_mr *reg(void *buf, size_t len, int access = IBV_ACCESS_LOCAL_WRITE)
	{
		ibv_mr *m = ibv_reg_mr(pd, buf, len, access);
		if (!m)
			fail("ibv_reg_mr");
		mrs.push_back(m);
		return m;
	}

	int post_recv(ibv_mr *mr, void *buf, uint32_t len, uint64_t wr_id)
	{
		ibv_sge s{reinterpret_cast<uintptr_t>(buf), len, mr->lkey};
		ibv_recv_wr wr{};
		wr.wr_id = wr_id;
		wr.sg_list = &s;
		wr.num_sge = 1;
		ibv_recv_wr *bad = nullptr;
		return ibv_post_recv(qp, &wr, &bad);
	}

	/* One work request through the extended API. `op` is IBV_WR_*. */
	int post(ibv_wr_opcode op, ibv_ah *ah, const Addr &to, ibv_mr *mr, const void *buf, uint32_t len,
		 uint64_t wr_id, uint32_t rkey = 0, uint64_t raddr = 0, uint32_t imm = 0, bool inl = false,
		 uint32_t hints = 0)
	{
		ibv_wr_start(qpx);
		qpx->wr_id = wr_id;
		qpx->wr_flags = IBV_SEND_SIGNALED;
		switch (op) {
		case IBV_WR_SEND: ibv_wr_send(qpx); break;
		case IBV_WR_SEND_WITH_IMM: ibv_wr_send_imm(qpx, htonl(imm)); break;
		case IBV_WR_RDMA_WRITE: ibv_wr_rdma_write(qpx, rkey, raddr); break;
		case IBV_WR_RDMA_WRITE_WITH_IMM: ibv_wr_rdma_write_imm(qpx, rkey, raddr, htonl(imm)); break;
		case IBV_WR_RDMA_READ: ibv_wr_rdma_read(qpx, rkey, raddr); break;
		default: break;
		}
		if (inl)
			ibv_wr_set_inline_data(qpx, const_cast<void *>(buf), len);
		else
			ibv_wr_set_sge(qpx, mr ? mr->lkey : 0, reinterpret_cast<uintptr_t>(buf), len);
		ibv_wr_set_ud_addr(qpx, ah, to.qpn, to.qkey);
		if (hints)
			efadv_wr_set_processing_hints(efadv_qp_from_ibv_qp_ex(qpx), hints);
		return ibv_wr_complete(qpx);
	}

	/* Polls until `n` completions arrived or `timeout_ms` passed (a bound, not a sync);
	 * polls at least once. */
	std::vector<Completion> wait(size_t n, int timeout_ms = 10000)
	{
		std::vector<Completion> out;
		auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
		for (bool first = true; out.size() < n && (first || std::chrono::steady_clock::now() < end); first = false) {
			ibv_poll_cq_attr pa{};
			if (ibv_start_poll(cq, &pa))
				continue;
			do {
				Completion c{};
				c.wr_id = cq->wr_id;
				c.status = cq->status;
				c.vendor_err = ibv_wc_read_vendor_err(cq);
				c.opcode = ibv_wc_read_opcode(cq);
				c.byte_len = ibv_wc_read_byte_len(cq);
				c.wc_flags = ibv_wc_read_wc_flags(cq);
				c.imm = (c.wc_flags & IBV_WC_WITH_IMM) ? ntohl(ibv_wc_read_imm_data(cq)) : 0;
				c.qp_num = ibv_wc_read_qp_num(cq);
				c.src_qp = ibv_wc_read_src_qp(cq);
				c.slid = ibv_wc_read_slid(cq);
				c.sl = ibv_wc_read_sl(cq);
				if (dvcq) {
					c.has_sgid = efadv_wc_read_sgid(dvcq, &c.sgid) == 0;
					if (opts_.unsolicited_cq)
						c.unsolicited = efadv_wc_is_unsolicited_cur(dvcq);
				}
				out.push_back(c);
			} while (out.size() < n && ibv_next_poll(cq) == 0);
			ibv_end_poll(cq);
		}
		return out;
	}

	/*
	 * Waits for `n` completions as a blocking CQ read (fi_cq_sread) does: poll; when the
	 * CQ is empty, arm it, poll again, then sleep on the completion channel. Needs
	 * NodeOpts::channel. `timeout_ms` bounds the whole wait.
	 */
	std::vector<Completion> wait_blocking(size_t n, int timeout_ms)
	{
		std::vector<Completion> out;
		auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
		for (;;) {
			std::vector<Completion> got = wait(n - out.size(), 0);
			out.insert(out.end(), got.begin(), got.end());
			if (out.size() >= n || !channel)
				return out;
			if (ibv_req_notify_cq(ibv_cq_ex_to_cq(cq), 0))
				fail("ibv_req_notify_cq");
			got = wait(n - out.size(), 0);
			out.insert(out.end(), got.begin(), got.end());
			if (out.size() >= n)
				return out; /* the event, if any, is collected by the next wait */
			auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
			if (left.count() <= 0)
				return out;
			pollfd pfd{channel->fd, POLLIN, 0};
			if (poll(&pfd, 1, int(left.count())) == 1) {
				ibv_cq *ev_cq;
				void *ev_ctx;
				if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == 0)
					ibv_ack_cq_events(ev_cq, 1);
			}
		}
	}

	efasim_stats stats() const
	{
		efasim_stats s{};
		efasim_query_stats(ctx, &s, sizeof s);
		return s;
	}

	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	ibv_comp_channel *channel = nullptr;
	ibv_cq_ex *cq = nullptr;
	efadv_cq *dvcq = nullptr;
	ibv_qp *qp = nullptr;
	ibv_qp_ex *qpx = nullptr;
	ibv_qp_cap cap{};
	Addr self{};
	std::vector<ibv_ah *> ahs;
	std::vector<ibv_mr *> mrs;

private:
	NodeOpts opts_;
};

/*
 * The initiator side of a test against a passive target (which sends its address, then
 * one RemoteMr): its node, the target's address, MR and an AH for it.
 */
struct Initiator {
	Node node;
	Addr target;
	RemoteMr rm;
	ibv_ah *ah;
	explicit Initiator(const Chan &ch, const NodeOpts &o = NodeOpts()) : node(o)
	{
		target = node.exchange(ch);
		rm = ch.recv<RemoteMr>();
		ah = node.ah_for(target);
	}
};

/*
 * The passive target an Initiator talks to: its node, which knows the initiator (an AH
 * for it), and `mem` registered with `access` and published. `mem` must outlive the
 * target (Node).
 */
struct PassiveTarget {
	Node node;
	ibv_mr *mr;
	PassiveTarget(const Chan &ch, std::vector<uint8_t> &mem, int access, const NodeOpts &o = NodeOpts()) : node(o)
	{
		node.ah_for(node.exchange(ch));
		mr = node.reg(mem.data(), mem.size(), access);
		ch.send(RemoteMr{uintptr_t(mem.data()), mr->rkey, uint32_t(mem.size())});
	}
};

/* Deterministic test data. */
inline void fill(void *buf, size_t len, uint32_t seed)
{
	auto *b = static_cast<uint8_t *>(buf);
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = uint8_t(x >> 16);
	}
}

inline bool check(const void *buf, size_t len, uint32_t seed)
{
	std::vector<uint8_t> want(len);
	fill(want.data(), len, seed);
	return len == 0 || std::memcmp(buf, want.data(), len) == 0; /* data() may be null */
}

} // namespace simtest

#endif /* EFA_TEST_SIMTEST_H */
