/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Device-level benchmark over L1: ping-pong latency and streaming bandwidth of sends
 * (1 B .. 8 KiB) and RDMA read/write bandwidth (64 KiB .. 16 MiB) on an EFA device,
 * beside a plain UDP ping-pong / stream of the same sizes on the same loopback, run in
 * the same invocation so the ratio is meaningful on a noisy machine.
 *
 *   efa_dev_bench [--iters N] [--sim-path PATH] [--quick] [--hw]
 *
 * Two processes (this one and a forked peer) exchange addresses over a socketpair.
 * Latency is the median round trip; bandwidth is bytes over wall time with a window of
 * outstanding operations. Both sides busy-poll, as the provider does.
 */
#include "log.h"
#include "verbs/qp.h"

#include "../sim/efasim.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace efa::verbs;
using Clock = std::chrono::steady_clock;

namespace {

struct Opts {
	int iters = 20000;
	std::string sim_path = EFA_BENCH_SIM_PATH;
	bool quick = false;
	bool hw = false;
};

/* ------------------------------------------------------------------ messaging */
int g_ctl = -1;
template <typename T> void csend(const T &v)
{
	if (write(g_ctl, &v, sizeof v) != ssize_t(sizeof v))
		_exit(3);
}
template <typename T> T crecv()
{
	T v;
	size_t got = 0;
	while (got < sizeof v) {
		ssize_t r = read(g_ctl, reinterpret_cast<char *>(&v) + got, sizeof v - got);
		if (r <= 0)
			_exit(4);
		got += size_t(r);
	}
	return v;
}
void csync() { csend<int>(1), crecv<int>(); }

double median(std::vector<double> &v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

double now_us() { return std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count(); }

/* ------------------------------------------------------------------ plain UDP */
struct Udp {
	int fd;
	sockaddr_in peer;
};

Udp udp_open()
{
	Udp u{};
	u.fd = socket(AF_INET, SOCK_DGRAM, 0);
	int sz = 8 << 20;
	setsockopt(u.fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
	setsockopt(u.fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(u.fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
	socklen_t l = sizeof a;
	getsockname(u.fd, reinterpret_cast<sockaddr *>(&a), &l);
	csend(a);
	u.peer = crecv<sockaddr_in>();
	return u;
}

void udp_recv(Udp &u, void *buf, size_t len)
{
	while (recv(u.fd, buf, len, MSG_DONTWAIT) < 0) {
	}
}

double udp_pingpong(bool client, size_t size, int iters)
{
	Udp u = udp_open();
	std::vector<char> buf(std::max<size_t>(size, 1));
	std::vector<double> rtt;
	csync();
	for (int i = 0; i < iters + 100; i++) {
		if (client) {
			double t0 = now_us();
			sendto(u.fd, buf.data(), size, 0, reinterpret_cast<sockaddr *>(&u.peer), sizeof u.peer);
			udp_recv(u, buf.data(), buf.size());
			if (i >= 100)
				rtt.push_back(now_us() - t0);
		} else {
			udp_recv(u, buf.data(), buf.size());
			sendto(u.fd, buf.data(), size, 0, reinterpret_cast<sockaddr *>(&u.peer), sizeof u.peer);
		}
	}
	close(u.fd);
	return median(rtt);
}

/* ------------------------------------------------------------------ EFA */
struct Ep {
	const Api *api;
	std::unique_ptr<Device> dev;
	Pd pd;
	Cq cq;
	Qp qp;
	Ah ah;
	Dest peer{};
	std::vector<uint8_t> mem;
	Mr mr;
	struct Addr {
		ibv_gid gid;
		uint32_t qpn;
		uint64_t addr;
		uint32_t rkey;
	};
	Addr remote{};

	explicit Ep(const Api *a, size_t memsize) : api(a)
	{
		auto devs = Device::discover(*api);
		if (devs.empty()) {
			fprintf(stderr, "no EFA device\n");
			_exit(2);
		}
		dev = std::move(devs[0]);
		pd = Pd::alloc(*dev).take();
		CqAttr ca;
		ca.depth = 4096;
		cq = Cq::create(*dev, ca).take();
		QpAttr qa;
		qa.sq_depth = 1024;
		qa.rq_depth = 4096;
		qa.qkey = 0x5151;
		qa.max_inline = dev->inline_size();
		auto q = Qp::create_srd(*dev, pd, cq, cq, qa);
		if (!q.ok()) {
			fprintf(stderr, "QP creation failed: %d\n", q.error());
			_exit(2);
		}
		qp = q.take();
		mem.resize(memsize);
		int access = IBV_ACCESS_LOCAL_WRITE | (dev->rdma_read() ? IBV_ACCESS_REMOTE_READ : 0) |
			     (dev->rdma_write() ? IBV_ACCESS_REMOTE_WRITE : 0);
		mr = Mr::reg(pd, mem.data(), mem.size(), access).take();
		csend(Addr{dev->gid(), qp.qpn(), uintptr_t(mem.data()), mr.rkey()});
		remote = crecv<Addr>();
		ah = Ah::create(pd, remote.gid).take();
		peer = Dest{ah.get(), remote.qpn, 0x5151};
	}
	Sge sge(size_t off, size_t len) const { return Sge{uintptr_t(mem.data() + off), uint32_t(len), mr.lkey()}; }
	void post_recv(size_t off, size_t len, uint64_t id)
	{
		Sge s = sge(off, len);
		if (qp.post_recv(id, {&s, 1})) {
			fprintf(stderr, "post_recv failed\n");
			_exit(5);
		}
	}
	/* Polls until `n` completions; returns how many of them were receives. */
	int wait(int n)
	{
		int got = 0, recvs = 0;
		while (got < n) {
			int r = cq.poll(n - got, [&](const Wc &w) {
				if (w.status != IBV_WC_SUCCESS) {
					fprintf(stderr, "completion error: vendor %u\n", w.vendor_err);
					_exit(6);
				}
				recvs += w.is_recv();
			});
			if (r < 0)
				_exit(7);
			got += r;
		}
		return recvs;
	}
};

double efa_pingpong(const Api *api, bool client, size_t size, int iters)
{
	Ep ep(api, 65536);
	std::vector<double> rtt;
	ep.post_recv(0, 8192, 1);
	csync();
	int pending_sends = 0;
	for (int i = 0; i < iters + 100; i++) {
		Sge s = ep.sge(16384, size);
		if (client) {
			double t0 = now_us();
			ep.qp.send(2, ep.peer, {&s, 1}, 0, 0);
			pending_sends++;
			/* wait for the pong; the send completion comes with it or later */
			for (;;) {
				int recvs = 0;
				int r = ep.cq.poll(4, [&](const Wc &w) {
					if (w.status != IBV_WC_SUCCESS)
						_exit(6);
					if (w.is_recv())
						recvs++;
					else
						pending_sends--;
				});
				if (r < 0)
					_exit(7);
				if (recvs)
					break;
			}
			ep.post_recv(0, 8192, 1);
			if (i >= 100)
				rtt.push_back(now_us() - t0);
		} else {
			for (;;) {
				int recvs = 0;
				ep.cq.poll(4, [&](const Wc &w) {
					if (w.is_recv())
						recvs++;
					else
						pending_sends--;
				});
				if (recvs)
					break;
			}
			ep.post_recv(0, 8192, 1);
			ep.qp.send(2, ep.peer, {&s, 1}, 0, 0);
			pending_sends++;
		}
	}
	while (pending_sends > 0)
		ep.cq.poll(4, [&](const Wc &w) {
			if (!w.is_recv())
				pending_sends--;
		});
	csync();
	return median(rtt);
}

/* Streams `count` sends of `size` bytes with `window` outstanding. Returns MB/s. */
double efa_send_bw(const Api *api, bool client, size_t size, int count, int window)
{
	Ep ep(api, 8u << 20);
	const int rq = 2048;
	if (!client)
		for (int i = 0; i < rq; i++)
			ep.post_recv(size_t(i % 512) * 8192, 8192, 1);
	csync();
	double t0 = now_us();
	if (client) {
		int posted = 0, done = 0;
		while (done < count) {
			while (posted < count && posted - done < window) {
				Sge s = ep.sge(0, size);
				ep.qp.send(1, ep.peer, {&s, 1}, 0, posted + 1 < count && posted - done + 1 < window ? uint32_t(kMore) : 0u);
				posted++;
			}
			ep.qp.flush();
			int r = ep.cq.poll(64, [&](const Wc &w) {
				if (w.status != IBV_WC_SUCCESS)
					_exit(6);
			});
			done += r;
		}
		csync();
	} else {
		int got = 0;
		while (got < count) {
			int r = ep.cq.poll(64, [&](const Wc &w) {
				if (w.status != IBV_WC_SUCCESS)
					_exit(6);
				ep.post_recv(size_t(w.wr_id % 512) * 8192, 8192, w.wr_id + 1);
			});
			got += r;
		}
		csync();
	}
	double us = now_us() - t0;
	return double(size) * count / us;
}

double udp_send_bw(bool client, size_t size, int count, int window)
{
	(void)window;
	Udp u = udp_open();
	std::vector<char> buf(std::max<size_t>(size, 1));
	csync();
	double t0 = now_us();
	if (client) {
		for (int i = 0; i < count; i++)
			sendto(u.fd, buf.data(), size, 0, reinterpret_cast<sockaddr *>(&u.peer), sizeof u.peer);
		char end = 1;
		/* the receiver counts what arrived; loss on plain UDP is simply not reported */
		csync();
		(void)end;
	} else {
		int got = 0;
		auto deadline = Clock::now() + std::chrono::seconds(10);
		while (got < count && Clock::now() < deadline) {
			if (recv(u.fd, buf.data(), buf.size(), MSG_DONTWAIT) >= 0)
				got++;
		}
		csync();
	}
	double us = now_us() - t0;
	close(u.fd);
	return double(size) * count / us;
}

/* RDMA write or read bandwidth: `count` ops of `size` bytes, `window` outstanding. */
double efa_rdma_bw(const Api *api, bool client, bool write, size_t size, int count, int window)
{
	Ep ep(api, size * 2);
	csync();
	double t0 = now_us();
	if (client) {
		int posted = 0, done = 0;
		while (done < count) {
			while (posted < count && posted - done < window) {
				Sge s = ep.sge(0, size);
				int ret = write ? ep.qp.write(1, ep.peer, {&s, 1}, ep.remote.rkey, ep.remote.addr + size, 0, 0)
						: ep.qp.read(1, ep.peer, {&s, 1}, ep.remote.rkey, ep.remote.addr + size, 0);
				if (ret) {
					fprintf(stderr, "RDMA post failed: %d\n", ret);
					_exit(8);
				}
				posted++;
			}
			done += ep.cq.poll(16, [&](const Wc &w) {
				if (w.status != IBV_WC_SUCCESS) {
					fprintf(stderr, "RDMA completion error: vendor %u\n", w.vendor_err);
					_exit(6);
				}
			});
		}
	}
	csync(); /* the target only waits: its device does the work */
	double us = now_us() - t0;
	return double(size) * count / us;
}

template <typename F> double pair(F fn)
{
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		g_ctl = sv[1];
		fn(false);
		_exit(0);
	}
	close(sv[1]);
	g_ctl = sv[0];
	double r = fn(true);
	int st = 0;
	waitpid(pid, &st, 0);
	close(sv[0]);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "peer failed (status %d)\n", st);
		exit(1);
	}
	return r;
}

} // namespace

int main(int argc, char **argv)
{
	Opts o;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (a == "--iters" && i + 1 < argc)
			o.iters = atoi(argv[++i]);
		else if (a == "--sim-path" && i + 1 < argc)
			o.sim_path = argv[++i];
		else if (a == "--quick")
			o.quick = true;
		else if (a == "--hw")
			o.hw = true;
		else {
			fprintf(stderr, "usage: %s [--iters N] [--sim-path PATH] [--quick] [--hw]\n", argv[0]);
			return 2;
		}
	}
	if (o.quick)
		o.iters = 2000;
	std::string why;
	const Api *api = o.hw ? load_rdma_core(&why) : load_sim(o.sim_path, &why);
	if (!api) {
		fprintf(stderr, "cannot load the device: %s\n", why.c_str());
		return 1;
	}
	printf("# efa_dev_bench: device level (L1) over %s; both sides busy-poll\n", api->origin.c_str());
	printf("# latency: median round trip of %d iterations; bandwidth: MB/s (1e6 B/s)\n\n", o.iters);

	const char *only = getenv("EFA_BENCH_ONLY_RDMA");
	const size_t sizes[] = {1, 8, 64, 512, 1024, 4096, 8192};
	printf("%-8s %12s %12s %8s %14s %14s\n", "size", "udp_rtt_us", "efa_rtt_us", "ratio", "udp_send_MBps",
	       "efa_send_MBps");
	for (size_t sz : sizes) {
		if (only)
			break;
		double u = pair([&](bool c) { return udp_pingpong(c, sz, o.iters); });
		double e = pair([&](bool c) { return efa_pingpong(api, c, sz, o.iters); });
		const int count = o.quick ? 20000 : 100000;
		double ub = pair([&](bool c) { return udp_send_bw(c, sz, count, 64); });
		double eb = pair([&](bool c) { return efa_send_bw(api, c, sz, count, 64); });
		printf("%-8zu %12.2f %12.2f %8.2f %14.1f %14.1f\n", sz, u, e, e / u, ub, eb);
		fflush(stdout);
	}
	printf("\n%-10s %14s %14s\n", "size", "write_MBps", "read_MBps");
	const size_t rsizes[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
	for (size_t sz : rsizes) {
		const size_t total = o.quick ? size_t(256) << 20 : size_t(1) << 30;
		const int count = std::max(8, int(total / sz));
		double w = pair([&](bool c) { return efa_rdma_bw(api, c, true, sz, count, 8); });
		double r = pair([&](bool c) { return efa_rdma_bw(api, c, false, sz, count, 8); });
		printf("%-10zu %14.1f %14.1f\n", sz, w, r);
		fflush(stdout);
	}
	return 0;
}
