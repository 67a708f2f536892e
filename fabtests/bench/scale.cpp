/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fi_efa_scale: one endpoint and many peers. A hub process opens one RDM endpoint; N
 * peer processes (forked before any opens libfabric) open E endpoints each, on one
 * domain and AV per process, each endpoint with its own CQ. The hub talks to all N x E:
 *
 *   1. small: the endpoints of the first half of the processes each send the hub one
 *      small tagged message and receive one from it (the hub posts a receive per peer
 *      and sends to each, all at once); then those of the second half;
 *   2. large: L peer endpoints at once exchange a large message with the hub, both ways;
 *   3. small with every peer again, after the large ones are done.
 *
 * Every byte is checked. The hub reports its memory (mapped, resident, and heap in use
 * from mallinfo2) when its endpoint is open and after each phase: the growth from the
 * first half to the second, divided by the peers of the second half, is what one more
 * idle peer costs (one-time costs were paid in the first half); the peak of the large
 * phase over its start (its buffers allocated), per busy peer. Each peer process
 * reports its memory per endpoint. Only the
 * public libfabric API; processes meet over pipes. A watchdog (-g seconds) fails the
 * run instead of hanging.
 *
 *   fi_efa_scale [-n PROCS] [-e EPS] [-p PROV] [-F FABRIC] [-L LARGE] [-S SIZE] [-m SMALL] [-g SECONDS] [-M KIB]
 *
 * -M: fail when the hub's heap grows by more than KIB per idle peer, less what its
 * operation pools grew (efa's statistics, pool_bytes: a pool keeps its high-water mark,
 * which follows how many operations were in flight at once, not how many peers).
 * Exit status 0: all data arrived intact; 1: an error (printed); 2: usage; 77: the
 * provider is not available.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_tagged.h>

#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Opts {
	int procs = 8;
	int eps = 128;
	std::string prov = "efa";
	std::string fabric = "efa";
	int large = 8;
	size_t large_size = 1 << 20;
	size_t small_size = 64;
	int grace = 300;
	double max_idle_kib = 0; /* -M: fail above this much heap per idle peer at the hub */
};

Opts g_opt;
constexpr uint64_t kToPeer = 1ull << 40; /* tag bit: a message from the hub */

[[noreturn]] void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "fi_efa_scale[%d]: ", int(getpid()));
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	_exit(1);
}

void check(const char *call, long ret)
{
	if (ret)
		die("%s: %s", call, fi_strerror(int(-ret)));
}

/* ------------------------------------------------------------ pipes */

void put(int fd, const void *p, size_t n)
{
	const auto *b = static_cast<const uint8_t *>(p);
	while (n) {
		const ssize_t r = write(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("pipe write: %s", strerror(errno));
		b += r;
		n -= size_t(r);
	}
}

void get(int fd, void *p, size_t n)
{
	auto *b = static_cast<uint8_t *>(p);
	while (n) {
		const ssize_t r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			die("pipe read: %s", r ? strerror(errno) : "closed");
		b += r;
		n -= size_t(r);
	}
}

template <typename T> void put(int fd, const T &v) { put(fd, &v, sizeof v); }
template <typename T> T get(int fd)
{
	T v;
	get(fd, &v, sizeof v);
	return v;
}

/* ------------------------------------------------------------ memory */

struct Mem {
	size_t size = 0; /* mapped (virtual) */
	size_t rss = 0;	 /* resident set */
	size_t heap = 0; /* malloc'd bytes in use */
	size_t pools = 0; /* of it, kept by ep's operation pools (efa's statistics; 0 elsewhere) */
};

Mem mem_now(fid_ep *ep = nullptr)
{
	Mem m;
	fi_efa_ops_stats *ops = nullptr;
	fi_efa_ep_stats st{};
	if (ep && !fi_open_ops(&ep->fid, FI_EFA_STATS_OPS, 0, reinterpret_cast<void **>(&ops), nullptr) &&
	    ops->query_ep(ep, &st, sizeof st) >= ssize_t(offsetof(fi_efa_ep_stats, pool_bytes) + sizeof st.pool_bytes))
		m.pools = st.pool_bytes;
	if (FILE *f = fopen("/proc/self/statm", "r")) {
		unsigned long size, res;
		if (fscanf(f, "%lu %lu", &size, &res) == 2) {
			m.size = size * size_t(sysconf(_SC_PAGESIZE));
			m.rss = res * size_t(sysconf(_SC_PAGESIZE));
		}
		fclose(f);
	}
	const struct mallinfo2 mi = mallinfo2();
	m.heap = mi.uordblks + mi.hblkhd;
	return m;
}

uint8_t pattern(uint64_t tag, size_t i) { return uint8_t((tag * 2654435761u) >> 13 ^ i ^ (i >> 8)); }

void fill(std::vector<uint8_t> &b, uint64_t tag, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pattern(tag, i);
}

bool intact(const std::vector<uint8_t> &b, uint64_t tag, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pattern(tag, i))
			return false;
	return true;
}

/* ------------------------------------------------------------ libfabric */

struct Net {
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	fid_domain *dom = nullptr;
	fid_av *av = nullptr;
	std::vector<fid_ep *> eps;
	std::vector<fid_cq *> cqs;
};

void open_net(Net &n, int eps, size_t av_count)
{
	fi_info *hints = fi_allocinfo();
	hints->caps = FI_TAGGED;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->fabric_attr->prov_name = strdup(g_opt.prov.c_str());
	if (!g_opt.fabric.empty())
		hints->fabric_attr->name = strdup(g_opt.fabric.c_str());
	const int r = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &n.info);
	fi_freeinfo(hints);
	if (r == -FI_ENODATA)
		_exit(77);
	check("fi_getinfo", r);
	check("fi_fabric", fi_fabric(n.info->fabric_attr, &n.fab, nullptr));
	check("fi_domain", fi_domain(n.fab, n.info, &n.dom, nullptr));
	fi_av_attr aa{};
	aa.type = FI_AV_TABLE;
	aa.count = av_count;
	check("fi_av_open", fi_av_open(n.dom, &aa, &n.av, nullptr));
	for (int i = 0; i < eps; i++) {
		fid_cq *cq;
		fid_ep *ep;
		fi_cq_attr ca{};
		ca.format = FI_CQ_FORMAT_TAGGED;
		check("fi_cq_open", fi_cq_open(n.dom, &ca, &cq, nullptr));
		check("fi_endpoint", fi_endpoint(n.dom, n.info, &ep, nullptr));
		check("fi_ep_bind(cq)", fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
		check("fi_ep_bind(av)", fi_ep_bind(ep, &n.av->fid, 0));
		check("fi_enable", fi_enable(ep));
		n.eps.push_back(ep);
		n.cqs.push_back(cq);
	}
}

void close_net(Net &n)
{
	for (size_t i = 0; i < n.eps.size(); i++) {
		fi_close(&n.eps[i]->fid);
		fi_close(&n.cqs[i]->fid);
	}
	fi_close(&n.av->fid);
	fi_close(&n.dom->fid);
	fi_close(&n.fab->fid);
	fi_freeinfo(n.info);
}

std::vector<uint8_t> name_of(fid_ep *ep)
{
	std::vector<uint8_t> b(256);
	size_t len = b.size();
	check("fi_getname", fi_getname(&ep->fid, b.data(), &len));
	b.resize(len);
	return b;
}

/* One buffer and its registration per operation. */
struct Op {
	fi_context2 ctx;
	std::vector<uint8_t> buf;
	fid_mr *mr = nullptr;
	uint64_t tag = 0;
	size_t len = 0;
	bool recv = false;
	bool done = false;
};

void reg(Net &n, Op &op, size_t len)
{
	op.buf.assign(len, 0);
	op.len = len;
	static uint64_t key = 1; /* unique, where the application chooses keys */
	check("fi_mr_reg", fi_mr_reg(n.dom, op.buf.data(), len, FI_SEND | FI_RECV, 0, key++, 0, &op.mr, nullptr));
}

/* Reads cq once; marks completed operations, checks received data. Returns how many. */
int reap(fid_cq *cq)
{
	fi_cq_tagged_entry e[32];
	const ssize_t n = fi_cq_read(cq, e, 32);
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		fi_cq_err_entry err{};
		fi_cq_readerr(cq, &err, 0);
		die("error completion: %s (prov_errno %d)", fi_strerror(err.err), err.prov_errno);
	}
	if (n < 0)
		die("fi_cq_read: %s", fi_strerror(int(-n)));
	for (ssize_t i = 0; i < n; i++) {
		Op &op = *static_cast<Op *>(e[i].op_context);
		if (op.recv) {
			if (e[i].tag != op.tag || e[i].len != op.len || !intact(op.buf, op.tag, op.len))
				die("message tag %#lx: wrong tag, length (%zu) or data", (unsigned long)op.tag, e[i].len);
		}
		op.done = true;
	}
	return int(n);
}

template <typename F> void post(F f, const std::vector<fid_cq *> &cqs, int &done)
{
	ssize_t r;
	while ((r = f()) == -FI_EAGAIN)
		for (fid_cq *cq : cqs)
			done += reap(cq);
	if (r)
		die("post: %s", fi_strerror(int(-r)));
}

/* ------------------------------------------------------------ roles */

double secs_since(std::chrono::steady_clock::time_point t)
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/*
 * The phases, each ended by everybody (the parent hands out tokens): the hub's peers
 * are split by process into two halves, so that its memory after the first half (one-
 * time costs paid) and after the second gives the cost of one more idle peer.
 */
enum Phase : uint32_t { SmallFirstHalf, SmallSecondHalf, Large, SmallAgain, NumPhases };

struct HubReport {
	Mem before, opened, after[NumPhases], large_base, large_peak;
	double secs[NumPhases];
};

/* Which of the hub's peers (indices [first, first + count)) take part in a phase. */
void phase_peers(Phase ph, int peers, int &first, int &count)
{
	const int half = (g_opt.procs / 2) * g_opt.eps;
	switch (ph) {
	case SmallFirstHalf: first = 0, count = half; break;
	case SmallSecondHalf: first = half, count = peers - half; break;
	case Large: first = 0, count = std::min(g_opt.large, peers); break;
	default: first = 0, count = peers; break;
	}
}

size_t phase_size(Phase ph) { return ph == Large ? g_opt.large_size : g_opt.small_size; }

/*
 * One exchange on `eps`: with each peer index i in [first, first + count), a receive
 * of its message (tag i, or i | kToPeer at a peer) and a send of ours. Buffers are
 * allocated and registered before anything is posted; `base` is the memory then, and
 * `peak` the most seen while the exchange runs (the hub's large phase).
 */
void exchange(Net &n, bool at_hub, const std::vector<fi_addr_t> &addr, int first, int count, size_t size,
	      Mem *base = nullptr, Mem *peak = nullptr)
{
	std::vector<Op> in(static_cast<size_t>(count)), out(static_cast<size_t>(count));
	for (int k = 0; k < count; k++) {
		const uint64_t id = uint64_t(first + k);
		reg(n, in[size_t(k)], size);
		in[size_t(k)].tag = at_hub ? id : id | kToPeer;
		in[size_t(k)].recv = true;
		reg(n, out[size_t(k)], size);
		out[size_t(k)].tag = at_hub ? id | kToPeer : id;
		fill(out[size_t(k)].buf, out[size_t(k)].tag, size);
	}
	if (base)
		*base = *peak = mem_now();
	int done = 0;
	for (int k = 0; k < count; k++) {
		fid_ep *ep = n.eps[at_hub ? 0 : size_t(k)];
		const fi_addr_t a = addr[at_hub ? size_t(first + k) : 0];
		Op &r = in[size_t(k)], &s = out[size_t(k)];
		post([&] { return fi_trecv(ep, r.buf.data(), size, fi_mr_desc(r.mr), a, r.tag, 0, &r.ctx); }, n.cqs, done);
		post([&] { return fi_tsend(ep, s.buf.data(), size, fi_mr_desc(s.mr), a, s.tag, &s.ctx); }, n.cqs, done);
	}
	while (done < 2 * count) {
		for (fid_cq *cq : n.cqs)
			done += reap(cq);
		if (peak) {
			const Mem m = mem_now();
			peak->rss = std::max(peak->rss, m.rss);
			peak->heap = std::max(peak->heap, m.heap);
			peak->size = std::max(peak->size, m.size);
		}
	}
	for (auto *v : {&in, &out})
		for (Op &o : *v)
			fi_close(&o.mr->fid);
}

/* The hub: one endpoint, every peer in its AV. */
void hub(int rd, int wr, int peers)
{
	HubReport rep{};
	rep.before = mem_now();
	Net n;
	open_net(n, 1, size_t(peers));
	rep.opened = mem_now();
	std::vector<fi_addr_t> addr(static_cast<size_t>(peers));
	for (int i = 0; i < peers; i++) {
		const auto len = get<uint32_t>(rd);
		std::vector<uint8_t> name(len);
		get(rd, name.data(), len);
		if (fi_av_insert(n.av, name.data(), 1, &addr[size_t(i)], 0, nullptr) != 1)
			die("fi_av_insert of peer %d failed", i);
	}
	const std::vector<uint8_t> me = name_of(n.eps[0]);
	put(wr, uint32_t(me.size()));
	put(wr, me.data(), me.size());
	for (uint32_t ph = 0; ph < NumPhases; ph++) {
		get<uint32_t>(rd);
		int first, count;
		phase_peers(Phase(ph), peers, first, count);
		const auto t = std::chrono::steady_clock::now();
		if (ph == Large)
			exchange(n, true, addr, first, count, phase_size(Phase(ph)), &rep.large_base, &rep.large_peak);
		else
			exchange(n, true, addr, first, count, phase_size(Phase(ph)));
		rep.secs[ph] = secs_since(t);
		rep.after[ph] = mem_now(n.eps[0]);
		put(wr, ph);
	}
	put(wr, rep);
	get<uint32_t>(rd); /* everybody done: close */
	close_net(n);
	_exit(0);
}

struct PeerReport {
	Mem before, opened;
};

/* A peer process (rank 0 is the first): eps endpoints, only the hub in its AV. */
void peer(int rd, int wr, int rank, int eps)
{
	PeerReport rep{};
	rep.before = mem_now();
	Net n;
	open_net(n, eps, 1);
	rep.opened = mem_now();
	put(wr, uint32_t(eps));
	for (fid_ep *ep : n.eps) {
		const std::vector<uint8_t> name = name_of(ep);
		put(wr, uint32_t(name.size()));
		put(wr, name.data(), name.size());
	}
	const auto len = get<uint32_t>(rd);
	std::vector<uint8_t> hub_name(len);
	get(rd, hub_name.data(), len);
	std::vector<fi_addr_t> hub(1);
	if (fi_av_insert(n.av, hub_name.data(), 1, &hub[0], 0, nullptr) != 1)
		die("fi_av_insert of the hub failed");
	const int mine = rank * eps; /* this process's first peer index at the hub */
	const int peers = g_opt.procs * eps;
	for (uint32_t ph = 0; ph < NumPhases; ph++) {
		get<uint32_t>(rd);
		int first, count;
		phase_peers(Phase(ph), peers, first, count);
		/* This process's endpoints among [first, first + count): a prefix of them. */
		const int lo = std::max(first, mine), hi = std::min(first + count, mine + eps);
		if (lo < hi && lo == mine)
			exchange(n, false, hub, mine, hi - lo, phase_size(Phase(ph)));
		put(wr, ph);
	}
	put(wr, rep);
	/* Until everybody is done: the hub may still need our progress. */
	for (pollfd pfd{rd, POLLIN, 0}; poll(&pfd, 1, 0) == 0;)
		for (fid_cq *cq : n.cqs)
			reap(cq);
	get<uint32_t>(rd);
	close_net(n);
	_exit(0);
}

void usage()
{
	fprintf(stderr, "usage: fi_efa_scale [-n PROCS] [-e EPS] [-p PROV] [-F FABRIC] [-L LARGE] [-S SIZE] "
			"[-m SMALL] [-g SECONDS] [-M KIB]\n");
	exit(2);
}

double kib(double bytes) { return bytes / 1024.0; }

} // namespace

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "n:e:p:F:L:S:m:g:M:h")) != -1) {
		switch (c) {
		case 'n': g_opt.procs = atoi(optarg); break;
		case 'e': g_opt.eps = atoi(optarg); break;
		case 'p': g_opt.prov = optarg; break;
		case 'F': g_opt.fabric = optarg; break;
		case 'L': g_opt.large = atoi(optarg); break;
		case 'S': g_opt.large_size = size_t(strtoull(optarg, nullptr, 0)); break;
		case 'm': g_opt.small_size = size_t(strtoull(optarg, nullptr, 0)); break;
		case 'g': g_opt.grace = atoi(optarg); break;
		case 'M': g_opt.max_idle_kib = atof(optarg); break;
		default: usage();
		}
	}
	if (g_opt.procs < 2 || g_opt.eps < 1 || g_opt.small_size < 1 || g_opt.large < 0)
		usage();
	const int procs = g_opt.procs + 1; /* the hub is process 0 */
	const int peers = g_opt.procs * g_opt.eps;
	std::vector<int> to(static_cast<size_t>(procs)), from(static_cast<size_t>(procs));
	std::vector<pid_t> pids(static_cast<size_t>(procs));
	for (int r = 0; r < procs; r++) {
		int a[2], b[2];
		if (pipe(a) || pipe(b))
			die("pipe: %s", strerror(errno));
		fflush(nullptr);
		const pid_t pid = fork();
		if (pid < 0)
			die("fork: %s", strerror(errno));
		if (!pid) {
			close(a[1]);
			close(b[0]);
			alarm(unsigned(g_opt.grace));
			if (r == 0)
				hub(a[0], b[1], peers);
			peer(a[0], b[1], r - 1, g_opt.eps);
		}
		close(a[0]);
		close(b[1]);
		to[size_t(r)] = a[1];
		from[size_t(r)] = b[0];
		pids[size_t(r)] = pid;
	}
	signal(SIGPIPE, SIG_IGN);
	alarm(unsigned(g_opt.grace) + 10);
	const auto t0 = std::chrono::steady_clock::now();
	/* Names: the peers' to the hub, the hub's to the peers. */
	for (int r = 1; r < procs; r++) {
		const auto n = get<uint32_t>(from[size_t(r)]);
		for (uint32_t i = 0; i < n; i++) {
			const auto len = get<uint32_t>(from[size_t(r)]);
			std::vector<uint8_t> name(len);
			get(from[size_t(r)], name.data(), len);
			put(to[0], len);
			put(to[0], name.data(), len);
		}
	}
	const auto hlen = get<uint32_t>(from[0]);
	std::vector<uint8_t> hname(hlen);
	get(from[0], hname.data(), hlen);
	for (int r = 1; r < procs; r++) {
		put(to[size_t(r)], hlen);
		put(to[size_t(r)], hname.data(), hlen);
	}
	const double t_setup = secs_since(t0);
	for (uint32_t ph = 0; ph < NumPhases; ph++) {
		for (int r = 0; r < procs; r++)
			put(to[size_t(r)], ph);
		for (int r = 0; r < procs; r++)
			get<uint32_t>(from[size_t(r)]);
	}
	const HubReport h = get<HubReport>(from[0]);
	std::vector<PeerReport> pr(static_cast<size_t>(procs));
	for (int r = 1; r < procs; r++)
		pr[size_t(r)] = get<PeerReport>(from[size_t(r)]);
	for (int r = 0; r < procs; r++)
		put(to[size_t(r)], uint32_t(9));
	int bad = 0;
	for (int r = 0; r < procs; r++) {
		int st = 0;
		waitpid(pids[size_t(r)], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			bad++;
	}
	Mem ep{};
	for (int r = 1; r < procs; r++) {
		ep.size += pr[size_t(r)].opened.size - pr[size_t(r)].before.size;
		ep.rss += pr[size_t(r)].opened.rss - pr[size_t(r)].before.rss;
		ep.heap += pr[size_t(r)].opened.heap - pr[size_t(r)].before.heap;
	}
	/* KiB per unit from a to b (b may be smaller). */
	auto per = [](size_t b, size_t a, int n) { return kib((double(b) - double(a)) / std::max(n, 1)); };
	int first, second;
	phase_peers(SmallSecondHalf, peers, first, second);
	const int large = std::min(g_opt.large, peers);
	const Mem &idle1 = h.after[SmallFirstHalf], &idle2 = h.after[SmallSecondHalf];
	/* What one more peer keeps: the heap's growth less the operation pools' (a pool keeps
	 * its high-water mark, which depends on how many operations were in flight at once:
	 * on load and timing, not on the number of peers). */
	const double idle_pools = per(idle2.pools, idle1.pools, second);
	const double idle_heap = per(idle2.heap, idle1.heap, second) - idle_pools;
	printf("fi_efa_scale: provider %s, fabric %s: hub + %d processes x %d endpoints = %d peers; small %zu B, "
	       "large %d x %zu B\n",
	       g_opt.prov.c_str(), g_opt.fabric.c_str(), g_opt.procs, g_opt.eps, peers, g_opt.small_size, large,
	       g_opt.large_size);
	printf("  setup (open, names, AV): %.2f s; small with the first %d peers: %.3f s, with the other %d: %.3f s; "
	       "large: %.3f s; small with all again: %.3f s\n",
	       t_setup, first, h.secs[SmallFirstHalf], second, h.secs[SmallSecondHalf], h.secs[Large], h.secs[SmallAgain]);
	printf("  endpoint at creation (KiB mapped / resident / heap): hub %.0f / %.0f / %.0f, peers' mean %.0f / %.0f / "
	       "%.0f\n",
	       per(h.opened.size, h.before.size, 1), per(h.opened.rss, h.before.rss, 1), per(h.opened.heap, h.before.heap, 1),
	       kib(double(ep.size) / peers), kib(double(ep.rss) / peers), kib(double(ep.heap) / peers));
	printf("  hub, per idle peer after its first exchange (the second %d over the first %d; KiB resident / heap "
	       "less pools): %.2f / %.2f (operation pools grew by %.2f more)\n",
	       second, first, per(idle2.rss, idle1.rss, second), idle_heap, idle_pools);
	printf("  hub, per busy peer (peak of the large phase over its start, %d peers; KiB resident / heap): %.1f / "
	       "%.1f\n",
	       large, per(h.large_peak.rss, h.large_base.rss, large), per(h.large_peak.heap, h.large_base.heap, large));
	printf("  hub, per peer after the large phase and after small with all again, over the idle state (KiB heap): "
	       "%.2f, %.2f\n",
	       per(h.after[Large].heap, idle2.heap, peers), per(h.after[SmallAgain].heap, idle2.heap, peers));
	if (bad) {
		printf("fi_efa_scale: %d process(es) failed\n", bad);
		return 1;
	}
	if (g_opt.max_idle_kib > 0 && idle_heap > g_opt.max_idle_kib) {
		printf("fi_efa_scale: %.2f KiB of heap per idle peer, over the limit of %.2f (-M)\n", idle_heap,
		       g_opt.max_idle_kib);
		return 1;
	}
	printf("fi_efa_scale: all data intact\n");
	return 0;
}
