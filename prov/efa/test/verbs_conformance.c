/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * An ordinary rdma-core program: C, compiled against the system's <infiniband/verbs.h>
 * and <infiniband/efadv.h> only (no project header), linked with -libverbs -lefa. It
 * proves two things about the software EFA device:
 *
 *   LD_PRELOAD=libefasim.so ./verbs_conformance
 *       the device interposes on rdma-core for an unmodified program;
 *   ./verbs_conformance --dlopen /path/libefasim.so
 *       with the real libibverbs loaded in the process, the device opened with
 *       dlopen(RTLD_LOCAL) still binds its own symbols (no interposition in reverse).
 *
 * Two processes (fork) exchange sends, a send with immediate, an RDMA write, an RDMA
 * read and checks of completion codes, then a datagram between UD QPs made with plain
 * ibv_create_qp and posted with ibv_post_send (the GRH in front of the payload); exit
 * status 0 means every check held.
 */
#define _GNU_SOURCE
#include <infiniband/efadv.h>
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c)                                                                             \
	do {                                                                                 \
		if (!(c)) {                                                                  \
			fprintf(stderr, "[%d] check failed at line %d: %s (errno %d)\n",       \
				(int)getpid(), __LINE__, #c, errno);                           \
			exit(1);                                                             \
		}                                                                            \
	} while (0)

/* The non-inline entry points, from the link (LD_PRELOAD mode) or from dlsym. */
static struct {
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	const char *(*get_device_name)(struct ibv_device *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	int (*dereg_mr)(struct ibv_mr *);
	struct ibv_ah *(*create_ah)(struct ibv_pd *, struct ibv_ah_attr *);
	int (*destroy_ah)(struct ibv_ah *);
	int (*destroy_cq)(struct ibv_cq *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	int (*destroy_qp)(struct ibv_qp *);
	struct ibv_qp_ex *(*qp_to_qp_ex)(struct ibv_qp *);
	int (*efadv_query_device)(struct ibv_context *, struct efadv_device_attr *, uint32_t);
	int (*efadv_query_ah)(struct ibv_ah *, struct efadv_ah_attr *, uint32_t);
	struct ibv_qp *(*efadv_create_qp_ex)(struct ibv_context *, struct ibv_qp_init_attr_ex *,
					     struct efadv_qp_init_attr *, uint32_t);
	struct ibv_cq_ex *(*efadv_create_cq)(struct ibv_context *, struct ibv_cq_init_attr_ex *,
					     struct efadv_cq_init_attr *, uint32_t);
} V;

static void use_linked(void)
{
	V.get_device_list = ibv_get_device_list;
	V.free_device_list = ibv_free_device_list;
	V.get_device_name = ibv_get_device_name;
	V.open_device = ibv_open_device;
	V.close_device = ibv_close_device;
	V.query_gid = ibv_query_gid;
	V.alloc_pd = ibv_alloc_pd;
	V.dealloc_pd = ibv_dealloc_pd;
	V.reg_mr = (struct ibv_mr * (*)(struct ibv_pd *, void *, size_t, int))(ibv_reg_mr);
	V.dereg_mr = ibv_dereg_mr;
	V.create_ah = ibv_create_ah;
	V.destroy_ah = ibv_destroy_ah;
	V.destroy_cq = ibv_destroy_cq;
	V.modify_qp = ibv_modify_qp;
	V.destroy_qp = ibv_destroy_qp;
	V.qp_to_qp_ex = ibv_qp_to_qp_ex;
	V.efadv_query_device = efadv_query_device;
	V.efadv_query_ah = efadv_query_ah;
	V.efadv_create_qp_ex = efadv_create_qp_ex;
	V.efadv_create_cq = efadv_create_cq;
}

static void use_dlopen(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	CHECK(h);
#define SYM(f, n) CHECK((*(void **)&V.f = dlsym(h, n)))
	SYM(get_device_list, "ibv_get_device_list");
	SYM(free_device_list, "ibv_free_device_list");
	SYM(get_device_name, "ibv_get_device_name");
	SYM(open_device, "ibv_open_device");
	SYM(close_device, "ibv_close_device");
	SYM(query_gid, "ibv_query_gid");
	SYM(alloc_pd, "ibv_alloc_pd");
	SYM(dealloc_pd, "ibv_dealloc_pd");
	SYM(reg_mr, "ibv_reg_mr");
	SYM(dereg_mr, "ibv_dereg_mr");
	SYM(create_ah, "ibv_create_ah");
	SYM(destroy_ah, "ibv_destroy_ah");
	SYM(destroy_cq, "ibv_destroy_cq");
	SYM(modify_qp, "ibv_modify_qp");
	SYM(destroy_qp, "ibv_destroy_qp");
	SYM(qp_to_qp_ex, "ibv_qp_to_qp_ex");
	SYM(efadv_query_device, "efadv_query_device");
	SYM(efadv_query_ah, "efadv_query_ah");
	SYM(efadv_create_qp_ex, "efadv_create_qp_ex");
	SYM(efadv_create_cq, "efadv_create_cq");
#undef SYM
}

struct addr {
	union ibv_gid gid;
	uint32_t qpn;
	uint64_t mem;
	uint32_t rkey;
};

struct node {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	char mem[65536];
};

static const uint32_t QKEY = 0x1111;

static void node_open(struct node *n)
{
	int num = 0;
	struct ibv_device **list = V.get_device_list(&num);
	CHECK(list && num >= 1);
	CHECK(strncmp(V.get_device_name(list[0]), "efasim", 6) == 0);
	n->ctx = V.open_device(list[0]);
	CHECK(n->ctx);
	V.free_device_list(list);

	struct efadv_device_attr ea;
	memset(&ea, 0, sizeof ea);
	CHECK(V.efadv_query_device(n->ctx, &ea, sizeof ea) == 0);
	CHECK(ea.max_sq_sge >= 1 && ea.inline_buf_size >= 32);
	CHECK(ea.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ);

	struct ibv_port_attr pa;
	CHECK(ibv_query_port(n->ctx, 1, &pa) == 0); /* the verbs.h inline, through the context ops */
	CHECK(pa.state == IBV_PORT_ACTIVE && pa.max_msg_sz >= 8192);

	n->pd = V.alloc_pd(n->ctx);
	CHECK(n->pd);
	struct ibv_cq_init_attr_ex ca;
	memset(&ca, 0, sizeof ca);
	ca.cqe = 64;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	struct efadv_cq_init_attr ec;
	memset(&ec, 0, sizeof ec);
	ec.wc_flags = EFADV_WC_EX_WITH_SGID;
	n->cq = V.efadv_create_cq(n->ctx, &ca, &ec, sizeof ec);
	CHECK(n->cq);

	struct ibv_qp_init_attr_ex qa;
	memset(&qa, 0, sizeof qa);
	qa.send_cq = ibv_cq_ex_to_cq(n->cq);
	qa.recv_cq = ibv_cq_ex_to_cq(n->cq);
	qa.cap.max_send_wr = 16;
	qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_DRIVER;
	qa.sq_sig_all = 1;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.pd = n->pd;
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
			    IBV_QP_EX_WITH_RDMA_WRITE;
	struct efadv_qp_init_attr eq; /* the layout of the installed efadv.h */
	memset(&eq, 0, sizeof eq);
	eq.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
	n->qp = V.efadv_create_qp_ex(n->ctx, &qa, &eq, sizeof eq);
	CHECK(n->qp);
	n->qpx = V.qp_to_qp_ex(n->qp);
	CHECK(n->qpx);

	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	CHECK(V.modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
	a.qp_state = IBV_QPS_RTR;
	CHECK(V.modify_qp(n->qp, &a, IBV_QP_STATE) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.rnr_retry = 7;
	CHECK(V.modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY) == 0);

	n->mr = V.reg_mr(n->pd, n->mem, sizeof n->mem,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	CHECK(n->mr);
}

static struct addr node_addr(struct node *n)
{
	struct addr a;
	memset(&a, 0, sizeof a);
	CHECK(V.query_gid(n->ctx, 1, 0, &a.gid) == 0);
	a.qpn = n->qp->qp_num;
	a.mem = (uintptr_t)n->mem;
	a.rkey = n->mr->rkey;
	return a;
}

static void node_close(struct node *n)
{
	if (n->ah)
		CHECK(V.destroy_ah(n->ah) == 0);
	CHECK(V.dereg_mr(n->mr) == 0);
	CHECK(V.destroy_qp(n->qp) == 0);
	CHECK(V.destroy_cq(ibv_cq_ex_to_cq(n->cq)) == 0);
	CHECK(V.dealloc_pd(n->pd) == 0);
	CHECK(V.close_device(n->ctx) == 0);
}

/* Polls one completion (bounded), returns its status; fills opcode/len/imm. */
static enum ibv_wc_status poll_one(struct node *n, uint64_t *wr_id, enum ibv_wc_opcode *op, uint32_t *len,
				   uint32_t *imm, uint32_t *vendor)
{
	struct ibv_poll_cq_attr pa;
	memset(&pa, 0, sizeof pa);
	for (long i = 0; i < 100000000L; i++) {
		if (ibv_start_poll(n->cq, &pa) == 0) {
			enum ibv_wc_status st = n->cq->status;
			*wr_id = n->cq->wr_id;
			*op = ibv_wc_read_opcode(n->cq);
			*len = ibv_wc_read_byte_len(n->cq);
			*imm = (ibv_wc_read_wc_flags(n->cq) & IBV_WC_WITH_IMM) ? ntohl(ibv_wc_read_imm_data(n->cq)) : 0;
			*vendor = ibv_wc_read_vendor_err(n->cq);
			ibv_end_poll(n->cq);
			return st;
		}
	}
	CHECK(!"no completion");
	return IBV_WC_GENERAL_ERR;
}

static void post_recv(struct node *n, size_t off, uint32_t len, uint64_t id)
{
	struct ibv_sge s = {(uintptr_t)(n->mem + off), len, n->mr->lkey};
	struct ibv_recv_wr wr, *bad;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = id;
	wr.sg_list = &s;
	wr.num_sge = 1;
	CHECK(ibv_post_recv(n->qp, &wr, &bad) == 0);
}

static void rw(int fd, void *p, size_t len, int out)
{
	char *b = p;
	while (len) {
		ssize_t r = out ? write(fd, b, len) : read(fd, b, len);
		CHECK(r > 0);
		b += r;
		len -= (size_t)r;
	}
}

/* ibv_create_qp: from the link, or from the device opened with dlopen. */
static struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);

/* A UD QP (plain verbs: EFA's only QP type there) on n's PD and CQ; one datagram from the
 * sender to the receiver, which finds the 40-byte GRH, then the payload. */
static void ud_check(int fd, int receiver, struct node *n, union ibv_gid peer_gid)
{
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = ia.recv_cq = ibv_cq_ex_to_cq(n->cq);
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.qp_type = IBV_QPT_UD;
	ia.sq_sig_all = 1;
	struct ibv_qp *qp = create_qp(n->pd, &ia);
	CHECK(qp && qp->qp_type == IBV_QPT_UD);
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	CHECK(V.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
	a.qp_state = IBV_QPS_RTR;
	CHECK(V.modify_qp(qp, &a, IBV_QP_STATE) == 0);
	a.qp_state = IBV_QPS_RTS;
	CHECK(V.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
	uint32_t qpn = qp->qp_num, peer_qpn;
	rw(fd, &qpn, sizeof qpn, 1);
	rw(fd, &peer_qpn, sizeof peer_qpn, 0);
	uint64_t id;
	enum ibv_wc_opcode op;
	uint32_t len, imm, vendor;
	char go = 1;
	if (receiver) {
		struct ibv_sge s = {(uintptr_t)(n->mem + 49152), 40 + 300, n->mr->lkey};
		struct ibv_recv_wr wr, *bad;
		memset(&wr, 0, sizeof wr);
		wr.wr_id = 21;
		wr.sg_list = &s;
		wr.num_sge = 1;
		CHECK(ibv_post_recv(qp, &wr, &bad) == 0);
		rw(fd, &go, 1, 1);
		CHECK(poll_one(n, &id, &op, &len, &imm, &vendor) == IBV_WC_SUCCESS);
		CHECK(id == 21 && op == IBV_WC_RECV && len == 40 + 300 && imm == 0x1234);
		struct ibv_grh grh;
		memcpy(&grh, n->mem + 49152, sizeof grh);
		CHECK(ntohl(grh.version_tclass_flow) >> 28 == 6);
		CHECK(memcmp(grh.sgid.raw, peer_gid.raw, 16) == 0);
		for (int i = 0; i < 300; i++)
			CHECK((uint8_t)n->mem[49152 + 40 + i] == 0x44);
	} else {
		rw(fd, &go, 1, 0);
		memset(n->mem + 50000, 0x44, 300);
		struct ibv_sge s = {(uintptr_t)(n->mem + 50000), 300, n->mr->lkey};
		struct ibv_send_wr wr, *bad;
		memset(&wr, 0, sizeof wr);
		wr.wr_id = 22;
		wr.sg_list = &s;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl(0x1234);
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.ud.ah = n->ah;
		wr.wr.ud.remote_qpn = peer_qpn;
		wr.wr.ud.remote_qkey = QKEY;
		CHECK(ibv_post_send(qp, &wr, &bad) == 0);
		CHECK(poll_one(n, &id, &op, &len, &imm, &vendor) == IBV_WC_SUCCESS);
		CHECK(id == 22 && op == IBV_WC_SEND);
	}
	rw(fd, &go, 1, receiver); /* the receiver checked: both may destroy */
	rw(fd, &go, 1, !receiver);
	CHECK(V.destroy_qp(qp) == 0);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--dlopen")) {
		use_dlopen(argv[2]);
		void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
		CHECK(h && (*(void **)&create_qp = dlsym(h, "ibv_create_qp")));
	} else if (argc == 1) {
		use_linked();
		create_qp = ibv_create_qp;
	} else {
		fprintf(stderr, "usage: %s [--dlopen /path/libefasim.so]\n", argv[0]);
		return 2;
	}
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	int fd = pid == 0 ? sv[1] : sv[0];
	struct node n;
	memset(&n, 0, sizeof n);
	node_open(&n);
	struct addr me = node_addr(&n), peer;
	rw(fd, &me, sizeof me, 1);
	rw(fd, &peer, sizeof peer, 0);
	struct ibv_ah_attr aa;
	memset(&aa, 0, sizeof aa);
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.dgid = peer.gid;
	n.ah = V.create_ah(n.pd, &aa);
	CHECK(n.ah);
	struct efadv_ah_attr eah;
	memset(&eah, 0, sizeof eah);
	CHECK(V.efadv_query_ah(n.ah, &eah, sizeof eah) == 0);
	uint64_t id;
	enum ibv_wc_opcode op;
	uint32_t len, imm, vendor;
	char go = 1;

	if (pid == 0) {
		/* receiver: two receives, then it stays passive while the peer does RDMA */
		post_recv(&n, 0, 4096, 1);
		post_recv(&n, 4096, 4096, 2);
		memset(n.mem + 32768, 0x33, 1000); /* what the peer will RDMA-read */
		rw(fd, &go, 1, 1);
		for (int i = 0; i < 2; i++) {
			CHECK(poll_one(&n, &id, &op, &len, &imm, &vendor) == IBV_WC_SUCCESS);
			CHECK(op == IBV_WC_RECV);
			if (id == 1)
				CHECK(len == 100 && (uint8_t)n.mem[0] == 0x11 && imm == 0);
			else
				CHECK(id == 2 && len == 10 && imm == 0xdeadbeef);
		}
		rw(fd, &go, 1, 0); /* wait for the peer's RDMA to finish */
		for (int i = 0; i < 2000; i++)
			CHECK((uint8_t)n.mem[16384 + i] == 0x22);
		ud_check(fd, 1, &n, peer.gid);
		node_close(&n);
		_exit(0);
	}

	rw(fd, &go, 1, 0);
	memset(n.mem, 0x11, 100);
	ibv_wr_start(n.qpx);
	n.qpx->wr_id = 10;
	n.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(n.qpx);
	ibv_wr_set_sge(n.qpx, n.mr->lkey, (uintptr_t)n.mem, 100);
	ibv_wr_set_ud_addr(n.qpx, n.ah, peer.qpn, QKEY);
	n.qpx->wr_id = 11;
	ibv_wr_send_imm(n.qpx, htonl(0xdeadbeef));
	ibv_wr_set_inline_data(n.qpx, n.mem + 200, 10);
	ibv_wr_set_ud_addr(n.qpx, n.ah, peer.qpn, QKEY);
	CHECK(ibv_wr_complete(n.qpx) == 0);
	for (int i = 0; i < 2; i++) {
		CHECK(poll_one(&n, &id, &op, &len, &imm, &vendor) == IBV_WC_SUCCESS);
		CHECK(op == IBV_WC_SEND);
	}
	/* RDMA write and read against the passive receiver */
	memset(n.mem + 8192, 0x22, 2000);
	ibv_wr_start(n.qpx);
	n.qpx->wr_id = 12;
	ibv_wr_rdma_write(n.qpx, peer.rkey, peer.mem + 16384);
	ibv_wr_set_sge(n.qpx, n.mr->lkey, (uintptr_t)(n.mem + 8192), 2000);
	ibv_wr_set_ud_addr(n.qpx, n.ah, peer.qpn, QKEY);
	CHECK(ibv_wr_complete(n.qpx) == 0);
	CHECK(poll_one(&n, &id, &op, &len, &imm, &vendor) == IBV_WC_SUCCESS);
	CHECK(id == 12 && op == IBV_WC_RDMA_WRITE);
	ibv_wr_start(n.qpx);
	n.qpx->wr_id = 13;
	ibv_wr_rdma_read(n.qpx, peer.rkey, peer.mem + 32768);
	ibv_wr_set_sge(n.qpx, n.mr->lkey, (uintptr_t)(n.mem + 40000), 1000);
	ibv_wr_set_ud_addr(n.qpx, n.ah, peer.qpn, QKEY);
	CHECK(ibv_wr_complete(n.qpx) == 0);
	CHECK(poll_one(&n, &id, &op, &len, &imm, &vendor) == IBV_WC_SUCCESS);
	CHECK(id == 13);
	for (int i = 0; i < 1000; i++)
		CHECK((uint8_t)n.mem[40000 + i] == 0x33);
	/* an out-of-bounds RDMA write: the EFA remote-access status */
	ibv_wr_start(n.qpx);
	n.qpx->wr_id = 14;
	ibv_wr_rdma_write(n.qpx, peer.rkey, peer.mem + 65536 - 8);
	ibv_wr_set_sge(n.qpx, n.mr->lkey, (uintptr_t)n.mem, 64);
	ibv_wr_set_ud_addr(n.qpx, n.ah, peer.qpn, QKEY);
	CHECK(ibv_wr_complete(n.qpx) == 0);
	CHECK(poll_one(&n, &id, &op, &len, &imm, &vendor) == IBV_WC_REM_ACCESS_ERR);
	CHECK(vendor == 7);
	rw(fd, &go, 1, 1);
	ud_check(fd, 0, &n, peer.gid);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	node_close(&n);
	printf("verbs_conformance (%s): all checks passed\n", argc == 1 ? "LD_PRELOAD" : "dlopen");
	return 0;
}
