/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fi_efa_soak: a bounded soak run. N processes (forked before any of them opens
 * libfabric) each open one RDM endpoint and, for -t seconds, exchange with every other
 * process:
 *
 *   - tagged messages of every protocol size (eager, medium, long CTS, long read: sizes
 *     drawn per message from a seeded hash, up to -M bytes), up to -w in flight to each
 *     peer, the receiver posting directed receives for the exact (source, sequence) tag;
 *     every byte is checked against the pattern both sides derive from (source,
 *     destination, sequence);
 *   - RMA: into a slot of each peer's window that only this process writes, an
 *     fi_writemsg with FI_DELIVERY_COMPLETE and then an fi_read of the same bytes back,
 *     checked. Without FI_MR_LOCAL, every other pair goes without descriptors, so the
 *     efa fabric alternates between the device's RDMA and its emulation.
 *
 * Then the processes stop sending, tell the parent (over pipes, no libfabric) how many
 * messages they sent to whom, and each keeps progressing until it received exactly what
 * was sent to it, and until everybody is done (a peer's emulated RMA needs the target's
 * progress). Any error completion, wrong length, wrong byte or unexpected tag is
 * counted and printed; the run fails on the first. A watchdog (-t plus -g seconds)
 * fails the run instead of hanging.
 *
 * The parent prints one line per process and a total: messages and bytes each way,
 * RMA operations, MB/s and errors. Faults come from the environment (EFASIM_LOSS, ...).
 * Only the public libfabric API: it runs on any provider (-p).
 *
 *   fi_efa_soak [-n PROCS] [-t SECONDS] [-p PROV] [-F FABRIC] [-D DOMAIN] [-M MAXSIZE]
 *               [-w WINDOW] [-R RMASIZE] [-g GRACE] [-s SEED]
 */
#include "endpoint.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kMaxProcs = 16;
constexpr size_t kMaxName = 64;

struct Opts {
	int procs = 4;
	int seconds = 60;
	int grace = 120;
	std::string prov = "efa";
	std::string fabric;
	std::string domain;
	size_t max_size = 2u << 20;
	size_t rma_size = 256u << 10;
	int window = 4;
	uint64_t seed = 1;
};

/* ------------------------------------------------------------ parent <-> child */

enum class Msg : uint32_t { Name = 1, Names, Sent, Expect, Done, Close };

struct Wire {
	Msg kind;
	uint32_t from;
	uint32_t name_len;
	uint8_t name[kMaxName];
	uint64_t rma_addr;
	uint64_t rma_key;
	uint64_t counts[kMaxProcs]; /* Sent/Expect: messages per peer */
	/* Done: the process's figures */
	uint64_t msgs_out, bytes_out, msgs_in, bytes_in, rma_ops, rma_bytes, errors;
	double seconds;
};

bool write_all(int fd, const void *p, size_t n)
{
	const auto *b = static_cast<const uint8_t *>(p);
	while (n) {
		ssize_t r = write(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		b += r;
		n -= size_t(r);
	}
	return true;
}

/* Blocking read of a whole Wire (false on EOF or error). */
bool read_all(int fd, Wire &w)
{
	auto *b = reinterpret_cast<uint8_t *>(&w);
	size_t n = sizeof w;
	while (n) {
		ssize_t r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		b += r;
		n -= size_t(r);
	}
	return true;
}

/* ------------------------------------------------------------ patterns */

uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t key_of(uint64_t seed, int src, int dst, uint64_t seq, uint64_t what)
{
	return mix(seed ^ mix((uint64_t(src) << 56) ^ (uint64_t(dst) << 48) ^ (what << 44) ^ seq));
}

/* Half eager, a quarter medium, then long CTS and long read sizes. */
size_t msg_size(const Opts &o, int src, int dst, uint64_t seq)
{
	const uint64_t h = key_of(o.seed, src, dst, seq, 1);
	const uint64_t r = h % 100, v = h >> 8;
	size_t s;
	if (r < 50)
		s = 1 + v % 8192;
	else if (r < 75)
		s = 8193 + v % (65536 - 8192);
	else if (r < 92)
		s = 65537 + v % ((1u << 20) - 65536);
	else
		s = (1u << 20) + v % (4u << 20);
	return std::min(s, o.max_size);
}

void fill(uint8_t *p, size_t n, uint64_t key)
{
	uint64_t x = key;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		x = mix(x);
		memcpy(p + i, &x, 8);
	}
	x = mix(x);
	for (; i < n; i++, x >>= 8)
		p[i] = uint8_t(x);
}

/* ------------------------------------------------------------ the child */

struct Op {
	fi_context2 ctx; /* first: FI_CONTEXT / FI_CONTEXT2 */
	enum Kind { Send, Recv, Write, Read } kind;
	int peer;
	uint64_t seq;
	size_t len;
	uint8_t *buf;
	bool busy = false;
};

class Child {
public:
	Child(const Opts &o, int rank, int rd, int wr) : o_(o), rank_(rank), rd_(rd), wr_(wr) {}
	int run();

private:
	[[noreturn]] void die(const char *what, int rc);
	void fail(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
	void open();
	void exchange();
	void progress();
	void post_send(int p);
	void post_recv(Op &op, int p, uint64_t seq);
	void post_rma(Op &op, Op::Kind kind);
	void completed(Op &op, size_t len, uint64_t tag);
	bool poll_parent(Wire &w);

	const Opts &o_;
	int rank_, rd_, wr_;
	bench::Endpoint obj_;
	fid_cq *cq_ = nullptr; /* obj_'s, for the data path */
	fid_ep *ep_ = nullptr;
	fid_mr *win_mr_ = nullptr;
	bool local_mr_ = false;
	void *desc_ = nullptr, *win_desc_ = nullptr;
	uint8_t *pool_ = nullptr, *window_ = nullptr, *scratch_ = nullptr;
	std::vector<fi_addr_t> addr_;
	std::vector<uint64_t> raddr_, rkey_;
	std::vector<Op> sends_, recvs_, rma_;
	std::vector<uint64_t> next_send_, next_recv_, got_, expect_, rma_seq_;
	std::vector<int> in_flight_;
	bool stopping_ = false;
	uint64_t msgs_out_ = 0, bytes_out_ = 0, msgs_in_ = 0, bytes_in_ = 0;
	uint64_t rma_ops_ = 0, rma_bytes_ = 0, errors_ = 0;
	int pending_rma_ = 0, pending_send_ = 0;
};

void Child::die(const char *what, int rc)
{
	fprintf(stderr, "soak[%d]: %s: %d (%s)\n", rank_, what, rc, fi_strerror(-rc));
	_exit(1);
}

void Child::fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "soak[%d]: ERROR: ", rank_);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	errors_++;
}

void Child::open()
{
	bench::Selection sel;
	sel.prov = o_.prov;
	sel.fabric = o_.fabric;
	sel.domain = o_.domain;
	sel.caps = FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	sel.cq_format = FI_CQ_FORMAT_TAGGED;
	sel.cq_size = 4096;
	sel.av_count = kMaxProcs;
	try {
		obj_.open(sel);
	} catch (const bench::Error &e) {
		fprintf(stderr, "soak[%d]: %s\n", rank_, e.what());
		_exit(1);
	}
	const fi_info *info = obj_.info();
	if (rank_ == 0)
		fprintf(stderr, "soak: provider %s, fabric %s, domain %s\n", info->fabric_attr->prov_name,
			info->fabric_attr->name, info->domain_attr->name);
	local_mr_ = obj_.mr_mode() & FI_MR_LOCAL;
	cq_ = obj_.cq();
	ep_ = obj_.ep();

	/* Per peer: window send and receive buffers of max_size, one RMA buffer. */
	const int n = o_.procs, w = o_.window;
	const size_t pool = size_t(n) * (2 * w * o_.max_size + o_.rma_size);
	pool_ = static_cast<uint8_t *>(aligned_alloc(4096, pool));
	window_ = static_cast<uint8_t *>(aligned_alloc(4096, size_t(n) * o_.rma_size));
	scratch_ = static_cast<uint8_t *>(aligned_alloc(4096, std::max(o_.max_size, o_.rma_size)));
	if (!pool_ || !window_ || !scratch_)
		die("out of memory", -FI_ENOMEM);
	memset(window_, 0, size_t(n) * o_.rma_size);
	try {
		desc_ = fi_mr_desc(obj_.reg(pool_, pool, FI_SEND | FI_RECV | FI_READ | FI_WRITE));
		win_mr_ = obj_.reg(window_, size_t(n) * o_.rma_size, FI_REMOTE_READ | FI_REMOTE_WRITE);
	} catch (const bench::Error &e) {
		fprintf(stderr, "soak[%d]: %s\n", rank_, e.what());
		_exit(1);
	}
	win_desc_ = fi_mr_desc(win_mr_);

	sends_.resize(size_t(n) * w);
	recvs_.resize(size_t(n) * w);
	rma_.resize(size_t(n));
	for (int p = 0; p < n; p++) {
		uint8_t *base = pool_ + size_t(p) * (2 * w * o_.max_size + o_.rma_size);
		for (int k = 0; k < w; k++) {
			sends_[size_t(p) * w + k].buf = base + size_t(k) * o_.max_size;
			recvs_[size_t(p) * w + k].buf = base + size_t(w + k) * o_.max_size;
		}
		rma_[size_t(p)].buf = base + size_t(2 * w) * o_.max_size;
	}
	next_send_.assign(size_t(n), 0);
	next_recv_.assign(size_t(n), 0);
	got_.assign(size_t(n), 0);
	expect_.assign(size_t(n), UINT64_MAX);
	rma_seq_.assign(size_t(n), 0);
	in_flight_.assign(size_t(n), 0);
}

/* Name, window address and key to the parent; everybody's back. */
void Child::exchange()
{
	Wire w{};
	w.kind = Msg::Name;
	w.from = uint32_t(rank_);
	size_t len = kMaxName;
	int rc = fi_getname(&ep_->fid, w.name, &len);
	if (rc)
		die("fi_getname", rc);
	w.name_len = uint32_t(len);
	w.rma_addr = obj_.remote_addr(window_);
	w.rma_key = fi_mr_key(win_mr_);
	if (!write_all(wr_, &w, sizeof w))
		die("pipe to parent", -FI_EIO);
	addr_.assign(size_t(o_.procs), FI_ADDR_NOTAVAIL);
	raddr_.assign(size_t(o_.procs), 0);
	rkey_.assign(size_t(o_.procs), 0);
	for (int i = 0; i < o_.procs; i++) {
		Wire r;
		if (!read_all(rd_, r) || r.kind != Msg::Names)
			die("names from parent", -FI_EIO);
		const int p = int(r.from);
		try {
			addr_[size_t(p)] = obj_.insert(r.name);
		} catch (const bench::Error &) {
			die("fi_av_insert", -FI_EINVAL);
		}
		raddr_[size_t(p)] = r.rma_addr;
		rkey_[size_t(p)] = r.rma_key;
	}
}

void Child::post_send(int p)
{
	Op *op = nullptr;
	for (int k = 0; k < o_.window && !op; k++)
		if (!sends_[size_t(p) * o_.window + k].busy)
			op = &sends_[size_t(p) * o_.window + k];
	if (!op)
		return;
	const uint64_t seq = next_send_[size_t(p)];
	op->kind = Op::Send;
	op->peer = p;
	op->seq = seq;
	op->len = msg_size(o_, rank_, p, seq);
	fill(op->buf, op->len, key_of(o_.seed, rank_, p, seq, 2));
	const uint64_t tag = (uint64_t(rank_) << 48) | seq;
	ssize_t rc = fi_tsend(ep_, op->buf, op->len, desc_, addr_[size_t(p)], tag, &op->ctx);
	if (rc == -FI_EAGAIN)
		return;
	if (rc)
		die("fi_tsend", int(rc));
	op->busy = true;
	next_send_[size_t(p)]++;
	in_flight_[size_t(p)]++;
	pending_send_++;
}

void Child::post_recv(Op &op, int p, uint64_t seq)
{
	op.kind = Op::Recv;
	op.peer = p;
	op.seq = seq;
	op.len = o_.max_size;
	const uint64_t tag = (uint64_t(p) << 48) | seq;
	for (;;) {
		ssize_t rc = fi_trecv(ep_, op.buf, op.len, desc_, addr_[size_t(p)], tag, 0, &op.ctx);
		if (rc == 0)
			break;
		if (rc != -FI_EAGAIN)
			die("fi_trecv", int(rc));
		progress();
	}
	op.busy = true;
}

/* A write of a fresh pattern (delivery complete), then a read of it back. */
void Child::post_rma(Op &op, Op::Kind kind)
{
	const int p = op.peer;
	const uint64_t seq = rma_seq_[size_t(p)];
	if (kind == Op::Write) {
		op.len = 1 + key_of(o_.seed, rank_, p, seq, 3) % o_.rma_size;
		fill(op.buf, op.len, key_of(o_.seed, rank_, p, seq, 4));
	} else {
		memset(op.buf, 0, op.len);
	}
	op.kind = kind;
	iovec iov{op.buf, op.len};
	fi_rma_iov riov{raddr_[size_t(p)] + uint64_t(rank_) * o_.rma_size, op.len, rkey_[size_t(p)]};
	fi_msg_rma m{};
	m.msg_iov = &iov;
	/* Without FI_MR_LOCAL every other operation goes without a descriptor: a provider
	 * with device RDMA then takes its other path (the efa fabric emulates it). */
	void *desc = local_mr_ || seq % 2 == 0 ? desc_ : nullptr;
	m.desc = &desc;
	m.iov_count = 1;
	m.addr = addr_[size_t(p)];
	m.rma_iov = &riov;
	m.rma_iov_count = 1;
	m.context = &op.ctx;
	for (;;) {
		ssize_t rc = kind == Op::Write ? fi_writemsg(ep_, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE)
					       : fi_readmsg(ep_, &m, FI_COMPLETION);
		if (rc == 0)
			break;
		if (rc != -FI_EAGAIN)
			die(kind == Op::Write ? "fi_writemsg" : "fi_readmsg", int(rc));
		progress();
	}
	op.busy = true;
	pending_rma_++;
}

void Child::completed(Op &op, size_t len, uint64_t tag)
{
	const int p = op.peer;
	op.busy = false;
	switch (op.kind) {
	case Op::Send:
		msgs_out_++;
		bytes_out_ += op.len;
		in_flight_[size_t(p)]--;
		pending_send_--;
		break;
	case Op::Recv: {
		const uint64_t want_tag = (uint64_t(p) << 48) | op.seq;
		const size_t want = msg_size(o_, p, rank_, op.seq);
		if (tag != want_tag || len != want) {
			fail("message %" PRIu64 " from %d: tag %#" PRIx64 " len %zu, expected tag %#" PRIx64
			     " len %zu", op.seq, p, tag, len, want_tag, want);
		} else {
			fill(scratch_, want, key_of(o_.seed, p, rank_, op.seq, 2));
			if (memcmp(scratch_, op.buf, want) != 0)
				fail("message %" PRIu64 " from %d (%zu bytes): data differs", op.seq, p, want);
		}
		msgs_in_++;
		bytes_in_ += len;
		got_[size_t(p)]++;
		post_recv(op, p, next_recv_[size_t(p)]++);
		break;
	}
	case Op::Write:
		rma_ops_++;
		rma_bytes_ += op.len;
		pending_rma_--;
		post_rma(op, Op::Read);
		break;
	case Op::Read:
		rma_ops_++;
		rma_bytes_ += op.len;
		pending_rma_--;
		fill(scratch_, op.len, key_of(o_.seed, rank_, p, rma_seq_[size_t(p)], 4));
		if (memcmp(scratch_, op.buf, op.len) != 0)
			fail("RMA %" PRIu64 " at %d (%zu bytes): read back differs from what was written",
			     rma_seq_[size_t(p)], p, op.len);
		rma_seq_[size_t(p)]++;
		if (!stopping_)
			post_rma(op, Op::Write);
		break;
	}
}

void Child::progress()
{
	fi_cq_tagged_entry e[16];
	ssize_t n = fi_cq_read(cq_, e, 16);
	if (n == -FI_EAGAIN)
		return;
	if (n == -FI_EAVAIL) {
		fi_cq_err_entry err{};
		if (fi_cq_readerr(cq_, &err, 0) == 1) {
			Op *op = static_cast<Op *>(err.op_context);
			fail("error completion (%s op, peer %d, seq %" PRIu64 "): err %d (%s), prov_errno %d (%s)",
			     op ? (op->kind == Op::Send ? "send" : op->kind == Op::Recv ? "recv"
							     : op->kind == Op::Write ? "write" : "read") : "?",
			     op ? op->peer : -1, op ? op->seq : 0, err.err, fi_strerror(err.err), err.prov_errno,
			     fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0));
			_exit(1); /* the run has failed; the parent reports it */
		}
		return;
	}
	if (n < 0)
		die("fi_cq_read", int(n));
	for (ssize_t i = 0; i < n; i++)
		completed(*static_cast<Op *>(e[i].op_context), e[i].len, e[i].tag);
}

bool Child::poll_parent(Wire &w)
{
	pollfd pf{rd_, POLLIN, 0};
	if (poll(&pf, 1, 0) <= 0)
		return false;
	if (!read_all(rd_, w))
		die("parent went away", -FI_EIO);
	return true;
}

int Child::run()
{
	open();
	exchange();
	const int n = o_.procs;
	/* Receives for the first window of every peer, one RMA chain per peer. */
	for (int p = 0; p < n; p++) {
		if (p == rank_)
			continue;
		for (int k = 0; k < o_.window; k++)
			post_recv(recvs_[size_t(p) * o_.window + k], p, next_recv_[size_t(p)]++);
		rma_[size_t(p)].peer = p;
		rma_[size_t(p)].seq = 0;
		post_rma(rma_[size_t(p)], Op::Write);
	}
	const auto start = std::chrono::steady_clock::now();
	const auto end = start + std::chrono::seconds(o_.seconds);
	while (std::chrono::steady_clock::now() < end && !errors_) {
		for (int p = 0; p < n; p++)
			if (p != rank_ && in_flight_[size_t(p)] < o_.window)
				post_send(p);
		progress();
	}
	/* Drain what this process started. */
	stopping_ = true;
	while ((pending_send_ || pending_rma_) && !errors_)
		progress();
	const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
	Wire w{};
	w.kind = Msg::Sent;
	w.from = uint32_t(rank_);
	for (int p = 0; p < n; p++)
		w.counts[p] = next_send_[size_t(p)];
	if (!write_all(wr_, &w, sizeof w))
		die("pipe to parent", -FI_EIO);
	/* Everything sent to this process, exactly. */
	bool have_expect = false, closing = false, done_sent = false;
	while (!closing && !errors_) {
		progress();
		Wire r;
		if (poll_parent(r)) {
			if (r.kind == Msg::Expect) {
				for (int p = 0; p < n; p++)
					expect_[size_t(p)] = r.counts[p];
				have_expect = true;
			} else if (r.kind == Msg::Close) {
				closing = true;
			}
		}
		if (have_expect && !done_sent) {
			bool all = true;
			for (int p = 0; p < n; p++) {
				if (got_[size_t(p)] > expect_[size_t(p)])
					fail("%" PRIu64 " messages from %d, but it sent %" PRIu64, got_[size_t(p)], p,
					     expect_[size_t(p)]);
				all = all && got_[size_t(p)] == expect_[size_t(p)];
			}
			if (all) {
				Wire d{};
				d.kind = Msg::Done;
				d.from = uint32_t(rank_);
				d.msgs_out = msgs_out_;
				d.bytes_out = bytes_out_;
				d.msgs_in = msgs_in_;
				d.bytes_in = bytes_in_;
				d.rma_ops = rma_ops_;
				d.rma_bytes = rma_bytes_;
				d.errors = errors_;
				d.seconds = secs;
				if (!write_all(wr_, &d, sizeof d))
					die("pipe to parent", -FI_EIO);
				done_sent = true;
			}
		}
	}
	if (errors_)
		return 1;
	/* Posted receives beyond the last message are simply closed with the endpoint. */
	obj_.close();
	free(pool_);
	free(window_);
	free(scratch_);
	return 0;
}

/* ------------------------------------------------------------ the parent */

void usage()
{
	fprintf(stderr,
		"usage: fi_efa_soak [-n PROCS (2..%d, 4)] [-t SECONDS (60)] [-p PROV (efa)] [-F FABRIC]\n"
		"                   [-D DOMAIN] [-M MAX_MSG (2 MiB)] [-w WINDOW (4)] [-R RMA_SIZE (256 KiB)]\n"
		"                   [-g GRACE_SECONDS (120)] [-s SEED (1)]\n",
		kMaxProcs);
}

int parse(int argc, char **argv, Opts &o)
{
	int c;
	while ((c = getopt(argc, argv, "n:t:p:F:D:M:w:R:g:s:h")) != -1) {
		switch (c) {
		case 'n': o.procs = atoi(optarg); break;
		case 't': o.seconds = atoi(optarg); break;
		case 'p': o.prov = optarg; break;
		case 'F': o.fabric = optarg; break;
		case 'D': o.domain = optarg; break;
		case 'M': o.max_size = strtoull(optarg, nullptr, 0); break;
		case 'w': o.window = atoi(optarg); break;
		case 'R': o.rma_size = strtoull(optarg, nullptr, 0); break;
		case 'g': o.grace = atoi(optarg); break;
		case 's': o.seed = strtoull(optarg, nullptr, 0); break;
		default: usage(); return c == 'h' ? 0 : 2;
		}
	}
	if (o.procs < 2 || o.procs > kMaxProcs || o.seconds < 1 || o.window < 1 || o.window > 64 ||
	    o.max_size < 1 || o.max_size > (64u << 20) || o.rma_size < 1 || o.rma_size > (16u << 20)) {
		usage();
		return 2;
	}
	return -1;
}

} // namespace

int main(int argc, char **argv)
{
	Opts o;
	if (int rc = parse(argc, argv, o); rc >= 0)
		return rc;
	const int n = o.procs;
	std::vector<int> to(static_cast<size_t>(n)), from(static_cast<size_t>(n));
	std::vector<pid_t> pids(static_cast<size_t>(n));
	for (int i = 0; i < n; i++) {
		int down[2], up[2];
		if (pipe(down) || pipe(up)) {
			perror("pipe");
			return 1;
		}
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			close(down[1]);
			close(up[0]);
			for (int j = 0; j < i; j++) {
				close(to[size_t(j)]);
				close(from[size_t(j)]);
			}
			Child child(o, i, down[0], up[1]);
			exit(child.run()); /* exit: the device prints its statistics (EFASIM_STATS) */
		}
		close(down[0]);
		close(up[1]);
		to[size_t(i)] = down[1];
		from[size_t(i)] = up[0];
		pids[size_t(i)] = pid;
	}

	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.seconds + o.grace);
	const char *phase = "exchanging names";
	auto recv_from = [&](int i, Wire &w) {
		for (;;) {
			const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
				deadline - std::chrono::steady_clock::now()).count();
			pollfd pf{from[size_t(i)], POLLIN, 0};
			int r = poll(&pf, 1, int(std::max<long long>(left, 0)));
			if (r < 0 && errno == EINTR)
				continue;
			if (r == 0) {
				fprintf(stderr, "soak: FAIL: process %d gave no answer while %s within -t + -g = %d s "
					"(hung?); killing all\n", i, phase, o.seconds + o.grace);
				return false;
			}
			if (!read_all(from[size_t(i)], w)) {
				fprintf(stderr, "soak: FAIL: process %d exited while %s\n", i, phase);
				return false;
			}
			return true;
		}
	};
	auto abort_all = [&]() {
		for (pid_t p : pids)
			kill(p, SIGKILL);
		for (pid_t p : pids)
			waitpid(p, nullptr, 0);
		return 1;
	};

	/* One message of `kind` from every process, in rank order. */
	auto gather = [&](Msg kind, std::vector<Wire> &out) {
		out.assign(static_cast<size_t>(n), Wire{});
		for (int i = 0; i < n; i++)
			if (!recv_from(i, out[size_t(i)]) || out[size_t(i)].kind != kind)
				return false;
		return true;
	};

	std::vector<Wire> names, sent, done;
	if (!gather(Msg::Name, names))
		return abort_all();
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			Wire w = names[size_t(j)];
			w.kind = Msg::Names;
			if (!write_all(to[size_t(i)], &w, sizeof w))
				return abort_all();
		}
	phase = "sending (or draining its operations)";
	if (!gather(Msg::Sent, sent))
		return abort_all();
	for (int i = 0; i < n; i++) {
		Wire w{};
		w.kind = Msg::Expect;
		for (int j = 0; j < n; j++)
			w.counts[j] = sent[size_t(j)].counts[i];
		if (!write_all(to[size_t(i)], &w, sizeof w))
			return abort_all();
	}
	phase = "receiving what was sent to it";
	if (!gather(Msg::Done, done))
		return abort_all();
	for (int i = 0; i < n; i++) {
		Wire w{};
		w.kind = Msg::Close;
		write_all(to[size_t(i)], &w, sizeof w);
	}
	int status = 0;
	for (int i = 0; i < n; i++) {
		int st = 0;
		waitpid(pids[size_t(i)], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "soak: FAIL: process %d ended with status %#x\n", i, st);
			status = 1;
		}
	}
	uint64_t m = 0, b = 0, r = 0, rb = 0, err = 0;
	double secs = 0;
	printf("| proc | s | msgs out | MB out | msgs in | MB in | RMA ops | RMA MB | errors |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < n; i++) {
		const Wire &d = done[size_t(i)];
		printf("| %d | %.1f | %" PRIu64 " | %.1f | %" PRIu64 " | %.1f | %" PRIu64 " | %.1f | %" PRIu64 " |\n", i,
		       d.seconds, d.msgs_out, d.bytes_out / 1e6, d.msgs_in, d.bytes_in / 1e6, d.rma_ops,
		       d.rma_bytes / 1e6, d.errors);
		m += d.msgs_out;
		b += d.bytes_out;
		r += d.rma_ops;
		rb += d.rma_bytes;
		err += d.errors;
		secs = std::max(secs, d.seconds);
	}
	printf("soak: %d processes, %.1f s: %" PRIu64 " messages (%.1f MB, %.1f MB/s, %.0f msg/s), %" PRIu64
	       " RMA ops (%.1f MB, %.1f MB/s), every byte checked; %" PRIu64 " errors: %s\n",
	       n, secs, m, b / 1e6, b / 1e6 / secs, double(m) / secs, r, rb / 1e6, rb / 1e6 / secs, err,
	       status || err ? "FAIL" : "PASS");
	return status || err ? 1 : 0;
}
