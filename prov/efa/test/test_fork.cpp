/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork() while the provider is in use (fi_efa(7), "fork()"), through libfabric's public
 * API on the software device, two efa-fabric endpoints in this process:
 *
 *   - streaming tagged messages of every protocol (eager, medium, read-based) and RMA
 *     writes and reads, the process forks children in the middle of it: one that leaves
 *     at once (_exit), one that exits through exit() (libfabric's and the provider's
 *     cleanup run in it), one that exec()s, one that scribbles over its copy of every
 *     buffer, and one that calls the parent's endpoint, CQ, domain and AV. The parent's
 *     data and completions are all checked; the last child gets -FI_EINVAL from every
 *     call and the log line that says why. Through the device and through shm.
 *   - the endpoint's packet pools are MADV_DONTFORK (/proc/self/smaps' "dc" flag);
 *   - rdma-core's fork support on a kernel without copy-on-fork (the device's
 *     EFASIM_COPY_ON_FORK=0): the first domain turns it on (application registrations
 *     become MADV_DONTFORK), FI_EFA_FORK_SAFE=0 leaves it off, FI_EFA_FORK_SAFE=1 fails
 *     fi_domain when memory was registered before.
 */
#include "fitest.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using fitest::Side;

fi_info *g_info;
fid_fabric *g_fab;
Side g_ini, g_tgt;

void open_side(Side &s) { fitest::open_side(g_fab, g_info, s, 1024); }

void close_all()
{
	for (Side *s : {&g_ini, &g_tgt})
		if (s->ep)
			fitest::close_side(*s);
	cr_assert_eq(fi_close(&g_fab->fid), 0);
	fi_freeinfo(g_info);
}

void open_pair(bool shm)
{
	setenv("FI_EFA_ENABLE_SHM_TRANSFER", shm ? "1" : "0", 1);
	g_info = fitest::getinfo("efa", FI_TAGGED | FI_RMA);
	fitest::open_fabric(g_info, &g_fab);
	fitest::open_pair(g_fab, g_info, g_ini, g_tgt, 1024);
}

/* Every protocol on the software device: eager, medium (up to 64 KiB), read-based. */
constexpr size_t kSizes[] = {64, 4000, 12000, 65536, 300000, 1 << 20};
constexpr size_t kMsgs = 48;	  /* tagged messages */
constexpr size_t kRma = 24;	  /* writes, each read back */
constexpr size_t kSlot = 1 << 20; /* bytes per message or RMA slot */

uint8_t pattern(size_t msg, size_t i) { return uint8_t(msg * 131 + i * 7 + (i >> 9)); }

enum class Child { Exit_, Exit, Exec, Scribble, UseParent, Count };

/*
 * What the child that uses the parent's objects checks; its exit status is the number
 * of the first call that did not answer -FI_EINVAL (0: all did).
 */
int child_uses_parent(uint8_t *buf, fid_mr *mr)
{
	if (fi_tsend(g_ini.ep, buf, 64, fi_mr_desc(mr), g_ini.peer, 1, nullptr) != -FI_EINVAL)
		return 1;
	if (fi_trecv(g_tgt.ep, buf, 64, fi_mr_desc(mr), FI_ADDR_UNSPEC, 1, 0, nullptr) != -FI_EINVAL)
		return 2;
	fi_cq_tagged_entry e;
	if (fi_cq_read(g_ini.cq, &e, 1) != -FI_EINVAL)
		return 3;
	if (fi_write(g_ini.ep, buf, 64, fi_mr_desc(mr), g_ini.peer, 0, 0, nullptr) != -FI_EINVAL)
		return 4;
	fid_mr *m2 = nullptr;
	if (fi_mr_reg(g_ini.dom, buf, 64, FI_SEND, 0, 0, 0, &m2, nullptr) != -FI_EINVAL)
		return 5;
	fi_addr_t a;
	if (fi_av_insert(g_ini.av, g_tgt.name, 1, &a, 0, nullptr) != -FI_EINVAL)
		return 6;
	if (fi_close(&g_ini.ep->fid) != -FI_EINVAL || fi_close(&mr->fid) != -FI_EINVAL)
		return 7;
	return 0;
}

/* Forks a child of kind k; returns its pid. `log` receives the child's stderr. */
pid_t spawn(Child k, std::vector<uint8_t *> bufs, fid_mr *mr, int log)
{
	fflush(nullptr);
	const pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid)
		return pid;
	dup2(log, 2);
	switch (k) {
	case Child::Exit_: _exit(0);
	case Child::Exit: exit(0);
	case Child::Exec: execl("/bin/true", "true", (char *)nullptr); _exit(99);
	case Child::Scribble:
		for (uint8_t *b : bufs)
			memset(b, 0xee, kSlot);
		exit(0);
	case Child::UseParent: exit(child_uses_parent(bufs[0], mr));
	default: _exit(98);
	}
}

struct Progress {
	size_t sends = 0, recvs = 0, writes = 0, reads = 0;
};

/* Reads both CQs once; counts what completed. */
void poll(Progress &p)
{
	fi_cq_tagged_entry e[16];
	for (Side *s : {&g_ini, &g_tgt}) {
		const ssize_t n = fi_cq_read(s->cq, e, 16);
		if (n == -FI_EAGAIN)
			continue;
		if (n == -FI_EAVAIL) {
			fi_cq_err_entry err{};
			fi_cq_readerr(s->cq, &err, 0);
			cr_assert_fail("error completion: %s (prov_errno %d)", fi_strerror(err.err), err.prov_errno);
		}
		cr_assert_gt(n, 0, "fi_cq_read: %s", fi_strerror(int(-n)));
		for (ssize_t i = 0; i < n; i++) {
			const uint64_t f = e[i].flags;
			if (f & FI_RECV) {
				cr_assert_eq(e[i].len, kSizes[e[i].tag % std::size(kSizes)], "message %lu: length %zu",
					     (unsigned long)e[i].tag, e[i].len);
				p.recvs++;
			} else if (f & FI_WRITE) {
				p.writes++;
			} else if (f & FI_READ) {
				p.reads++;
			} else if (f & FI_SEND) {
				p.sends++;
			}
		}
	}
}

template <typename F> void post(F f, Progress &p)
{
	ssize_t r;
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
	while ((r = f()) == -FI_EAGAIN) {
		cr_assert(std::chrono::steady_clock::now() < end, "-FI_EAGAIN for 30 s");
		poll(p);
	}
	cr_assert_eq(r, 0, "post: %s", fi_strerror(int(-r)));
}

void stream_with_forks(bool shm)
{
	fitest::use_provider();
	open_pair(shm);
	std::vector<uint8_t> src(kMsgs * kSlot), dst(kMsgs * kSlot, 0), region(kRma * kSlot, 0), back(kRma * kSlot, 0);
	for (size_t m = 0; m < kMsgs; m++)
		for (size_t i = 0; i < kSlot; i++)
			src[m * kSlot + i] = pattern(m, i);
	fid_mr *smr, *dmr, *rmr, *bmr;
	const uint64_t acc = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
	cr_assert_eq(fi_mr_reg(g_ini.dom, src.data(), src.size(), acc, 0, 0, 0, &smr, nullptr), 0);
	cr_assert_eq(fi_mr_reg(g_tgt.dom, dst.data(), dst.size(), FI_RECV, 0, 0, 0, &dmr, nullptr), 0);
	cr_assert_eq(fi_mr_reg(g_tgt.dom, region.data(), region.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0,
			       &rmr, nullptr),
		     0);
	cr_assert_eq(fi_mr_reg(g_ini.dom, back.data(), back.size(), FI_READ, 0, 0, 0, &bmr, nullptr), 0);
	const bool virt = g_info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	const uint64_t rkey = fi_mr_key(rmr);
	auto raddr = [&](size_t k) { return (virt ? uint64_t(uintptr_t(region.data())) : 0) + k * kSlot; };

	int logs[2];
	cr_assert_eq(pipe(logs), 0);
	fcntl(logs[0], F_SETFL, O_NONBLOCK);
	std::vector<pid_t> kids;
	size_t next_kid = 0;
	Progress p;
	for (size_t m = 0; m < kMsgs; m++)
		post([&] { return fi_trecv(g_tgt.ep, dst.data() + m * kSlot, kSlot, fi_mr_desc(dmr), FI_ADDR_UNSPEC, m, 0,
					   nullptr); },
		     p);
	/* Messages and writes posted; every few, a child is forked while they move. */
	for (size_t m = 0; m < kMsgs; m++) {
		const size_t len = kSizes[m % std::size(kSizes)];
		post([&] { return fi_tsend(g_ini.ep, src.data() + m * kSlot, len, fi_mr_desc(smr), g_ini.peer, m, nullptr); },
		     p);
		if (m < kRma)
			post([&] { return fi_write(g_ini.ep, src.data() + m * kSlot, kSlot, fi_mr_desc(smr), g_ini.peer,
						   raddr(m), rkey, nullptr); },
			     p);
		if (m % 4 == 3) {
			const Child k = Child(next_kid++ % size_t(Child::Count));
			kids.push_back(spawn(k, {src.data(), dst.data(), region.data(), back.data()}, smr, logs[1]));
		}
		poll(p);
	}
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
	while ((p.sends < kMsgs || p.recvs < kMsgs || p.writes < kRma) && std::chrono::steady_clock::now() < end)
		poll(p);
	cr_assert(p.sends == kMsgs && p.recvs == kMsgs && p.writes == kRma, "sends %zu, receives %zu, writes %zu",
		  p.sends, p.recvs, p.writes);
	/* Each written slot read back, with one more child forked while the reads move. */
	for (size_t k = 0; k < kRma; k++) {
		post([&] { return fi_read(g_ini.ep, back.data() + k * kSlot, kSlot, fi_mr_desc(bmr), g_ini.peer, raddr(k),
					  rkey, nullptr); },
		     p);
		if (k == kRma / 2)
			kids.push_back(spawn(Child::Scribble, {src.data(), dst.data(), region.data(), back.data()}, smr,
					     logs[1]));
	}
	while (p.reads < kRma && std::chrono::steady_clock::now() < end)
		poll(p);
	cr_assert_eq(p.reads, kRma);

	/* The children: each ended as it should. */
	for (size_t i = 0; i < kids.size(); i++) {
		int st = 0;
		cr_assert_eq(waitpid(kids[i], &st, 0), kids[i]);
		cr_assert(WIFEXITED(st), "child %zu (kind %zu) did not exit: status %#x", i, i % size_t(Child::Count), st);
		cr_assert_eq(WEXITSTATUS(st), 0, "child %zu (kind %zu): call %d on the parent's objects did not answer "
						 "-FI_EINVAL",
			     i, i % size_t(Child::Count), WEXITSTATUS(st));
	}
	close(logs[1]);
	std::string log;
	char chunk[4096];
	ssize_t n;
	while ((n = read(logs[0], chunk, sizeof chunk)) > 0)
		log.append(chunk, size_t(n));
	close(logs[0]);
	cr_assert(log.find("fork() child of the process that opened") != std::string::npos,
		  "the children's log does not say why their calls were refused:\n%s", log.c_str());

	/* The parent's data, byte for byte. */
	for (size_t m = 0; m < kMsgs; m++) {
		const size_t len = kSizes[m % std::size(kSizes)];
		cr_assert_eq(memcmp(dst.data() + m * kSlot, src.data() + m * kSlot, len), 0, "message %zu (%zu bytes)", m,
			     len);
	}
	cr_assert_eq(memcmp(region.data(), src.data(), kRma * kSlot), 0, "written slots");
	cr_assert_eq(memcmp(back.data(), src.data(), kRma * kSlot), 0, "slots read back");
	for (fid_mr *m : {smr, dmr, rmr, bmr})
		cr_assert_eq(fi_close(&m->fid), 0);
	close_all();
}

/* In a fork() child (no Criterion there): its own fabric and two endpoints, one message
 * between them. 0, or the step that failed. */
int child_opens_its_own()
{
	fi_info *hints = fi_allocinfo(), *info = nullptr;
	hints->caps = FI_TAGGED;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = int(fitest::kMrMode);
	hints->fabric_attr->prov_name = strdup("efa");
	hints->fabric_attr->name = strdup("efa");
	const int r = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
	fi_freeinfo(hints);
	if (r)
		return 10;
	fid_fabric *fab;
	if (fi_fabric(info->fabric_attr, &fab, nullptr))
		return 11;
	fid_domain *dom[2];
	fid_av *av[2];
	fid_cq *cq[2];
	fid_ep *ep[2];
	uint8_t name[2][64];
	for (int i = 0; i < 2; i++) {
		fi_av_attr aa{};
		fi_cq_attr ca{};
		ca.format = FI_CQ_FORMAT_TAGGED;
		size_t len = sizeof name[i];
		if (fi_domain(fab, info, &dom[i], nullptr) || fi_av_open(dom[i], &aa, &av[i], nullptr) ||
		    fi_cq_open(dom[i], &ca, &cq[i], nullptr) || fi_endpoint(dom[i], info, &ep[i], nullptr) ||
		    fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV) || fi_ep_bind(ep[i], &av[i]->fid, 0) ||
		    fi_enable(ep[i]) || fi_getname(&ep[i]->fid, name[i], &len))
			return 12 + i;
	}
	fi_addr_t to;
	if (fi_av_insert(av[0], name[1], 1, &to, 0, nullptr) != 1)
		return 14;
	char out[32] = "from the child", in[32] = {};
	if (fi_trecv(ep[1], in, sizeof in, nullptr, FI_ADDR_UNSPEC, 3, 0, nullptr) ||
	    fi_tsend(ep[0], out, sizeof out, nullptr, to, 3, nullptr))
		return 15;
	int done = 0;
	for (long i = 0; i < 100000000 && done < 2; i++) {
		fi_cq_tagged_entry e;
		done += fi_cq_read(cq[0], &e, 1) == 1;
		done += fi_cq_read(cq[1], &e, 1) == 1;
	}
	if (done < 2 || strcmp(in, out))
		return 16;
	for (int i = 0; i < 2; i++)
		if (fi_close(&ep[i]->fid) || fi_close(&cq[i]->fid) || fi_close(&av[i]->fid) || fi_close(&dom[i]->fid))
			return 17;
	fi_close(&fab->fid);
	fi_freeinfo(info);
	return 0;
}

/* Bytes of this process's mappings that a fork() child does not get. */
size_t dontfork_bytes()
{
	std::ifstream f("/proc/self/smaps");
	std::string line;
	size_t total = 0, size_kb = 0;
	while (std::getline(f, line)) {
		if (line.rfind("Size:", 0) == 0)
			size_kb = std::stoul(line.substr(5));
		else if (line.rfind("VmFlags:", 0) == 0 && (line + " ").find(" dc ") != std::string::npos)
			total += size_kb * 1024;
	}
	return total;
}

/* Whether [p, p + len) lies in mappings a fork() child does not get. */
bool is_dontfork(const void *p, size_t len)
{
	std::ifstream f("/proc/self/smaps");
	std::string line;
	uintptr_t lo = 0, hi = 0;
	const uintptr_t a = uintptr_t(p), b = a + len;
	uintptr_t covered = 0;
	while (std::getline(f, line)) {
		unsigned long x, y;
		if (sscanf(line.c_str(), "%lx-%lx ", &x, &y) == 2 && line.find(':') > line.find('-')) {
			lo = x;
			hi = y;
		} else if (line.rfind("VmFlags:", 0) == 0 && (line + " ").find(" dc ") != std::string::npos) {
			const uintptr_t s = std::max(lo, a), e = std::min(hi, b);
			if (s < e)
				covered += e - s;
		}
	}
	return covered == len;
}

/* The software device's own entry point (the library the provider loaded). */
template <typename F> F sim_fn(const char *name)
{
	void *h = dlopen(EFA_TEST_SIM_PATH, RTLD_NOW | RTLD_NOLOAD);
	cr_assert_not_null(h, "the software device is not loaded");
	auto f = reinterpret_cast<F>(dlsym(h, name));
	cr_assert_not_null(f, "%s", name);
	return f;
}

} // namespace

TestSuite(fork, .timeout = 120);

Test(fork, streaming_survives_children_of_every_kind) { stream_with_forks(false); }

Test(fork, streaming_through_shm_survives_children_of_every_kind) { stream_with_forks(true); }

/* A child that opens the provider anew gets devices of its own (the parent's are
 * forgotten, not used); the parent's endpoints work on after it. */
Test(fork, child_opens_its_own_endpoints)
{
	fitest::use_provider();
	open_pair(false);
	std::vector<uint8_t> buf(64, 1), in(64);
	for (int round = 0; round < 2; round++) {
		Progress p;
		post([&] { return fi_trecv(g_tgt.ep, in.data(), 64, nullptr, FI_ADDR_UNSPEC, 0, 0, nullptr); }, p);
		post([&] { return fi_tsend(g_ini.ep, buf.data(), 64, nullptr, g_ini.peer, 0, nullptr); }, p);
		while (p.sends < 1 || p.recvs < 1)
			poll(p);
		if (round)
			break;
		fflush(nullptr);
		const pid_t pid = fork();
		if (!pid)
			_exit(child_opens_its_own());
		int st = 0;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's own endpoints: status %#x (step %d)", st,
			  WEXITSTATUS(st));
	}
	close_all();
}

Test(fork, packet_pools_are_not_inherited)
{
	fitest::use_provider();
	setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 1);
	const size_t before = dontfork_bytes();
	g_info = fitest::getinfo("efa", FI_TAGGED);
	fitest::open_fabric(g_info, &g_fab);
	open_side(g_ini);
	const size_t after = dontfork_bytes();
	/* 256 receive and 256 transmit buffers of one MTU (8,928 bytes) by default. */
	cr_assert_geq(after - before, size_t(512) * 8928, "MADV_DONTFORK bytes: %zu before the endpoint, %zu after",
		      before, after);
	close_all();
	cr_assert_leq(dontfork_bytes(), before + 4096, "the pools are given back at close");
}

/* A kernel that needs rdma-core's fork support (EFASIM_COPY_ON_FORK=0). */
Test(fork, old_kernel_fork_support_turned_on_by_the_first_domain, .init = [] { setenv("EFASIM_COPY_ON_FORK", "0", 1); })
{
	fitest::use_provider();
	setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 1);
	g_info = fitest::getinfo("efa", FI_TAGGED);
	fitest::open_fabric(g_info, &g_fab);
	auto status = sim_fn<ibv_fork_status (*)()>("ibv_is_fork_initialized");
	cr_assert_eq(status(), IBV_FORK_DISABLED);
	open_side(g_ini);
	cr_assert_eq(status(), IBV_FORK_ENABLED);
	open_side(g_tgt);
	cr_assert_eq(fi_av_insert(g_ini.av, g_tgt.name, 1, &g_ini.peer, 0, nullptr), 1);

	/* A read-based message from a buffer the application did not register: the
	 * provider registers it itself and keeps the registration in its cache, so its
	 * pages are MADV_DONTFORK; before a fork the unused entry is released, and the
	 * child can read its copy of the buffer. */
	if (!(g_info->domain_attr->mr_mode & FI_MR_LOCAL)) {
		std::vector<uint8_t> big(1 << 20, 0x5a), in(1 << 20);
		/* The first message to a peer goes before its HANDSHAKE (which says it can
		 * read): a few, so that the last one is read-based. */
		for (int round = 0; round < 3; round++) {
			cr_assert_eq(fi_trecv(g_tgt.ep, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, 5, 0, nullptr),
				     0); /* kSizes[5]: poll() checks lengths */
			Progress p;
			post([&] { return fi_tsend(g_ini.ep, big.data(), big.size(), nullptr, g_ini.peer, 5, nullptr); }, p);
			const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
			while ((p.sends < 1 || p.recvs < 1) && std::chrono::steady_clock::now() < end)
				poll(p);
			cr_assert(p.sends == 1 && p.recvs == 1 && in == big);
		}
		const long pg = sysconf(_SC_PAGESIZE);
		uint8_t *inner = reinterpret_cast<uint8_t *>((uintptr_t(big.data()) + pg - 1) & ~uintptr_t(pg - 1));
		if (is_dontfork(inner, size_t(pg))) { /* cached (a memory monitor is available) */
			fflush(nullptr);
			const pid_t pid = fork();
			if (!pid)
				_exit(inner[0] == 0x5a ? 0 : 1);
			int st = 0;
			cr_assert_eq(waitpid(pid, &st, 0), pid);
			cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
				  "the child could not read a buffer the cache had registered: status %#x", st);
			cr_assert(!is_dontfork(inner, size_t(pg)));
		}
	}
	/* The application's registration is now MADV_DONTFORK, while registered. */
	const long page = sysconf(_SC_PAGESIZE);
	std::vector<uint8_t> buf(size_t(page) * 4);
	uint8_t *aligned = reinterpret_cast<uint8_t *>((uintptr_t(buf.data()) + page - 1) & ~uintptr_t(page - 1));
	fid_mr *mr;
	cr_assert_eq(fi_mr_reg(g_ini.dom, aligned, size_t(page) * 2, FI_SEND, 0, 0, 0, &mr, nullptr), 0);
	cr_assert(is_dontfork(aligned, size_t(page) * 2));
	cr_assert_eq(fi_close(&mr->fid), 0);
	cr_assert(!is_dontfork(aligned, size_t(page) * 2));
	close_all();
}

Test(fork, old_kernel_fork_safe_0_leaves_it_off, .init = [] {
	setenv("EFASIM_COPY_ON_FORK", "0", 1);
	setenv("FI_EFA_FORK_SAFE", "0", 1);
})
{
	fitest::use_provider();
	g_info = fitest::getinfo("efa", FI_TAGGED);
	fitest::open_fabric(g_info, &g_fab);
	open_side(g_ini);
	cr_assert_eq(sim_fn<ibv_fork_status (*)()>("ibv_is_fork_initialized")(), IBV_FORK_DISABLED);
	close_all();
}

/* FI_EFA_FORK_SAFE=1 where memory was registered before the first domain (here by a
 * domain opened with the setting off): fi_domain fails rather than run unsafe. */
Test(fork, old_kernel_fork_safe_1_fails_when_too_late, .init = [] {
	setenv("EFASIM_COPY_ON_FORK", "0", 1);
	setenv("FI_EFA_FORK_SAFE", "1", 1);
})
{
	fitest::use_provider();
	g_info = fitest::getinfo("efa", FI_TAGGED);
	fitest::open_fabric(g_info, &g_fab);
	/* A registration through the device itself, as another library would make. */
	auto get_list = sim_fn<ibv_device **(*)(int *)>("ibv_get_device_list");
	auto open_dev = sim_fn<ibv_context *(*)(ibv_device *)>("ibv_open_device");
	auto alloc_pd = sim_fn<ibv_pd *(*)(ibv_context *)>("ibv_alloc_pd");
	auto reg_mr = sim_fn<ibv_mr *(*)(ibv_pd *, void *, size_t, int)>("ibv_reg_mr");
	int n = 0;
	ibv_device **list = get_list(&n);
	cr_assert(list && n > 0);
	ibv_context *ctx = open_dev(list[0]);
	cr_assert_not_null(ctx);
	ibv_pd *pd = alloc_pd(ctx);
	cr_assert_not_null(pd);
	static uint8_t buf[4096];
	cr_assert_not_null(reg_mr(pd, buf, sizeof buf, 0));
	fid_domain *dom = nullptr;
	cr_assert_eq(fi_domain(g_fab, g_info, &dom, nullptr), -FI_EINVAL);
	fi_close(&g_fab->fid);
	fi_freeinfo(g_info);
}
