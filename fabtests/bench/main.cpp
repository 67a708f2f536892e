/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fi_efa_bench: latency, bandwidth, message rate and RMA bandwidth of one libfabric
 * provider selection, between this process (the client, which measures and prints) and
 * a forked peer (the server), over the public fi_* API only.
 *
 * Each measurement is three runs driven by the client: a short run whose data is
 * verified, a warm-up run that also calibrates the iteration count (unless -I fixes it)
 * and the timed run. Exit status: 0 done, 2 failed, 3 no matching provider info.
 */
#include "bench.h"

#include <getopt.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

using namespace bench;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

void usage(FILE *out)
{
	std::fprintf(out,
		"usage: fi_efa_bench -p PROV [options]\n"
		"  -p PROV        provider name, e.g. efa, 'tcp;ofi_rxm', 'udp;ofi_rxd', shm\n"
		"  -F FABRIC      fabric name (e.g. efa-direct, efa)\n"
		"  -d DOMAIN      domain name (e.g. lo)\n"
		"  -m msg|tagged  message interface (default msg)\n"
		"  -e rdm|dgram   endpoint type (default rdm; dgram: FI_EP_DGRAM, message tests)\n"
		"  -L LABEL       name in the output (default: fabric name, else provider)\n"
		"  -t TESTS       comma list of lat,bw,rate,write,read,rma (default all)\n"
		"  -I N           fixed iterations per measurement (RMA: N*64KiB/size, at least 2);\n"
		"                 default: calibrated to -T seconds per measurement\n"
		"  -T SECONDS     time per timed run when calibrating (default 0.5, --quick 0.1)\n"
		"  -R N           timed runs per measurement; the best counts (default 3)\n"
		"  -w N           sends outstanding in bandwidth / message rate (default 64)\n"
		"  -W N           RMA operations outstanding (default 8)\n"
		"  -S BYTES       largest message size (default 8192; clamped to max_msg_size)\n"
		"  --min BYTES    smallest message size of the message tests (default 1)\n"
		"  --max-rma B    largest RMA size allowed (default: the provider's max_msg_size)\n"
		"  --quick        fewer sizes (powers of 4) and shorter runs\n"
		"  --csv          one line per measurement: label,test,size,value\n"
		"  --stall SEC    fail after SEC seconds without a completion (default 60)\n"
		"  --yield N      sched_yield() after N empty CQ polls in a row (default 64; 0: never)\n");
}

Opts parse(int argc, char **argv)
{
	Opts o;
	enum { OptQuick = 256, OptCsv, OptMaxRma, OptStall, OptYield, OptMin };
	static const option longopts[] = {
		{"quick", no_argument, nullptr, OptQuick}, {"csv", no_argument, nullptr, OptCsv},
		{"max-rma", required_argument, nullptr, OptMaxRma},
		{"stall", required_argument, nullptr, OptStall},
		{"yield", required_argument, nullptr, OptYield},
		{"min", required_argument, nullptr, OptMin},
		{"help", no_argument, nullptr, 'h'}, {nullptr, 0, nullptr, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "p:F:d:m:e:L:t:I:T:R:w:W:S:h", longopts, nullptr)) != -1) {
		switch (c) {
		case 'p': o.prov = optarg; break;
		case 'F': o.fabric = optarg; break;
		case 'd': o.domain = optarg; break;
		case 'm':
			if (std::strcmp(optarg, "msg") && std::strcmp(optarg, "tagged")) {
				usage(stderr);
				std::exit(2);
			}
			o.tagged = !std::strcmp(optarg, "tagged");
			break;
		case 'e':
			if (std::strcmp(optarg, "rdm") && std::strcmp(optarg, "dgram")) {
				usage(stderr);
				std::exit(2);
			}
			o.dgram = !std::strcmp(optarg, "dgram");
			break;
		case 'L': o.label = optarg; break;
		case 't': o.tests = optarg; break;
		case 'I': o.iters = std::strtoull(optarg, nullptr, 0); break;
		case 'T': o.target_s = std::atof(optarg); break;
		case 'R': o.reps = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
		case 'w': o.window = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
		case 'W': o.rma_window = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
		case 'S': o.max_msg = std::strtoull(optarg, nullptr, 0); break;
		case OptQuick: o.quick = true; break;
		case OptCsv: o.csv = true; break;
		case OptMaxRma: o.max_rma = std::strtoull(optarg, nullptr, 0); break;
		case OptStall: o.stall_s = std::atof(optarg); break;
		case OptYield: o.yield_every = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
		case OptMin: o.min_msg = std::strtoull(optarg, nullptr, 0); break;
		case 'h': usage(stdout); std::exit(0);
		default: usage(stderr); std::exit(2);
		}
	}
	if (o.prov.empty() || optind != argc || !o.window || !o.rma_window || !o.max_msg ||
	    !o.min_msg || o.min_msg > o.max_msg || !o.reps || (o.dgram && o.tagged)) {
		usage(stderr);
		std::exit(2);
	}
	if (o.target_s <= 0)
		o.target_s = o.quick ? 0.1 : 0.5;
	if (o.label.empty())
		o.label = (o.fabric.empty() ? o.prov : o.fabric) + (o.tagged ? "/tagged" : "") +
			  (o.dgram ? "/dgram" : "");
	return o;
}

std::set<std::string> test_set(const Opts &o)
{
	std::set<std::string> s;
	std::stringstream ss(o.tests);
	for (std::string t; std::getline(ss, t, ',');) {
		if (t == "rma") {
			s.insert("write");
			s.insert("read");
		} else if (t == "lat" || t == "bw" || t == "rate" || t == "write" || t == "read") {
			s.insert(t);
		} else {
			throw Error("unknown test '" + t + "' (lat,bw,rate,write,read,rma)");
		}
	}
	return s;
}

/* Powers of 2 (of 4 with --quick) from `lo` up to `hi`, plus `hi`, each clamped to
 * `limit`, without duplicates. */
std::vector<size_t> sizes(size_t lo, size_t hi, bool quick, size_t limit)
{
	std::vector<size_t> v;
	auto add = [&](size_t s) {
		s = std::min(s, limit);
		if (s && std::find(v.begin(), v.end(), s) == v.end())
			v.push_back(s);
	};
	for (size_t s = lo; s <= hi; s *= quick ? 4 : 2)
		add(s);
	add(hi);
	return v;
}

size_t rma_limit(const Opts &o, const Fabric &f)
{
	return o.max_rma ? o.max_rma : f.max_msg_size;
}

size_t rma_buffer(const Opts &o, const Fabric &f)
{
	auto t = test_set(o);
	if (!f.has_rma || (!t.count("write") && !t.count("read")))
		return 0;
	auto v = sizes(64 * KiB, 16 * MiB, o.quick, rma_limit(o, f));
	return *std::max_element(v.begin(), v.end());
}

/* ------------------------------------------------------------------ client */
struct Client {
	const Opts &o;
	Fabric &f;
	Bufs &b;
	Ctl &ctl;
	std::set<std::string> notes;

	void emit(const char *key, size_t size, double value, const char *unit, uint64_t iters)
	{
		if (o.csv)
			std::printf("%s,%s,%zu,%.4f\n", o.label.c_str(), key, size, value);
		else
			std::printf("%-16s %9zu B  %12.3f %-6s (%" PRIu64 " iterations)\n", key, size,
				    value, unit, iters);
	}
	void note(const std::string &n)
	{
		if (!n.empty() && notes.insert(n).second)
			std::printf("# note: %s\n", n.c_str());
	}

	/* One measurement: its data-checking run, then the iteration count. */
	uint64_t calibrate(Test t, size_t size, uint32_t w)
	{
		const bool lat = t == Test::Latency;
		const bool rma = t == Test::RmaWrite || t == Test::RmaRead;
		note(client_run(f, b, ctl, t, size, lat || rma ? 1 : 2 * w, w, true).note);
		if (o.iters)
			return rma ? std::max<uint64_t>(2, o.iters * 64 * KiB / size) : o.iters;
		const uint64_t lo = lat ? 100 : rma ? 2 : 2 * w;
		const uint64_t hi = lat ? 2000000 : rma ? 1000000 : 50000000;
		const uint64_t warm = lat ? (o.quick ? 100 : 500)
				    : rma ? std::clamp<uint64_t>(32 * MiB / size, 2, 2 * w) : 4 * w;
		double s = client_run(f, b, ctl, t, size, warm, w, false).seconds;
		double per = std::max(s, 1e-9) / double(warm);
		return std::clamp<uint64_t>(uint64_t(o.target_s / per), lo, hi);
	}

	struct Plan {
		Test t;
		size_t size;
		uint32_t w;
		uint64_t n = 0;
		uint32_t runs = 0;
		double seconds = 0, p50 = 0, p99 = 0;	/* of the best run */
	};

	/* The timed runs of a group go round its sizes -R times, so that the repetitions
	 * of one size are seconds apart: a spell of noise rarely spoils all of them. The
	 * best run counts (the lowest median for latency, else the shortest), as noise only
	 * ever slows a run down. */
	void run_group(std::vector<Plan> g)
	{
		try {
			for (uint32_t rep = 0; rep < o.reps; rep++)
				for (Plan &p : g) {
					if (rep == 0)
						p.n = calibrate(p.t, p.size, p.w);
					timed_run(p);
				}
		} catch (const Error &) {
			report(g);	/* what was measured before the failure */
			throw;
		}
		report(g);
	}
	void timed_run(Plan &p)
	{
		RunResult r = client_run(f, b, ctl, p.t, p.size, p.n, p.w, false);
		note(r.note);
		double p50 = 0, p99 = 0;
		if (std::vector<double> &v = r.rtt_us; !v.empty()) {
			std::sort(v.begin(), v.end());
			size_t i99 = size_t(std::ceil(0.99 * double(v.size()))) - 1;
			p50 = v[v.size() / 2] / 2;
			p99 = v[std::min(i99, v.size() - 1)] / 2;
		}
		bool better = p.t == Test::Latency ? p50 < p.p50 : r.seconds < p.seconds;
		if (!p.runs++ || better) {
			p.seconds = r.seconds;
			p.p50 = p50;
			p.p99 = p99;
		}
	}
	void report(const std::vector<Plan> &g)
	{
		for (const Plan &p : g) {
			if (!p.runs)
				continue;
			const double bytes = double(p.n) * double(p.size);
			switch (p.t) {
			case Test::Latency:
				emit("lat_p50_us", p.size, p.p50, "us", p.n);
				emit("lat_p99_us", p.size, p.p99, "us", p.n);
				break;
			case Test::Bandwidth:
				emit("bw_MBps", p.size, bytes / p.seconds / 1e6, "MB/s", p.n);
				break;
			case Test::MsgRate:
				emit("rate_Mmsgps", p.size, double(p.n) / p.seconds / 1e6, "Mmsg/s", p.n);
				break;
			case Test::RmaWrite:
				emit("rma_write_MBps", p.size, bytes / p.seconds / 1e6, "MB/s", p.n);
				break;
			case Test::RmaRead:
				emit("rma_read_MBps", p.size, bytes / p.seconds / 1e6, "MB/s", p.n);
				break;
			}
		}
	}
	void run_group(Test t, const std::vector<size_t> &sizes, uint32_t w)
	{
		std::vector<Plan> g;
		for (size_t s : sizes)
			g.push_back(Plan{t, s, w});
		run_group(std::move(g));
	}
};

void run_client(const Opts &o, Ctl &ctl)
{
	const auto tests = test_set(o);
	Fabric f(o, ctl);
	f.open();
	CtlMsg peer = ctl.recv(CtlType::Hello);
	CtlMsg hello;
	hello.type = CtlType::Hello;
	std::string name = f.local_name();
	hello.set_data(name.data(), name.size());
	ctl.send(hello);
	f.insert_peer(peer.data_str());

	/* Sender: w data sends (+ a few receives); receiver: 2*w data receives. */
	uint32_t w = o.window;
	if (f.tx_size)
		w = std::min<uint64_t>(w, f.tx_size);
	if (peer.c)
		w = std::min<uint64_t>(w, peer.c > 6 ? (peer.c - 4) / 2 : 1);
	uint32_t rw = f.tx_size ? uint32_t(std::min<uint64_t>(o.rma_window, f.tx_size)) : o.rma_window;

	Bufs b;
	b.alloc(f, o.max_msg, o.window, rma_buffer(o, f));
	Client cl{o, f, b, ctl, {}};
	std::printf("# %s: %s\n", o.label.c_str(), f.describe().c_str());
	if (w != o.window || rw != o.rma_window)
		cl.note("window clamped to " + std::to_string(w) + ", RMA window to " +
			std::to_string(rw) + " by the queue sizes");
	std::fflush(stdout);

	const auto msg = sizes(o.min_msg, o.max_msg, o.quick, std::min(o.max_msg, f.max_msg_size));
	if (tests.count("lat"))
		cl.run_group(Test::Latency, msg, 1);
	if (tests.count("bw"))
		cl.run_group(Test::Bandwidth, msg, w);
	if (tests.count("rate")) {
		std::vector<size_t> rate_sizes;
		for (size_t s : {size_t(1), size_t(8)})
			if (s <= f.max_msg_size)
				rate_sizes.push_back(s);
		cl.run_group(Test::MsgRate, rate_sizes, w);
	}
	if (tests.count("write") || tests.count("read")) {
		if (!f.has_rma || !peer.a) {
			cl.note("RMA skipped: the provider reports no FI_RMA");
		} else {
			const auto rs = sizes(64 * KiB, 16 * MiB, o.quick, rma_limit(o, f));
			if (tests.count("write"))
				cl.run_group(Test::RmaWrite, rs, rw);
			if (tests.count("read"))
				cl.run_group(Test::RmaRead, rs, rw);
		}
	}
	CtlMsg quit;
	quit.type = CtlType::Quit;
	ctl.send(quit);
}

/* ------------------------------------------------------------------ server */
void run_server(const Opts &o, Ctl &ctl)
{
	Fabric f(o, ctl);
	f.open();
	CtlMsg hello;
	hello.type = CtlType::Hello;
	hello.a = f.has_rma;
	hello.c = f.rx_size;
	std::string name = f.local_name();
	hello.set_data(name.data(), name.size());
	ctl.send(hello);
	f.insert_peer(ctl.recv(CtlType::Hello).data_str());
	Bufs b;
	b.alloc(f, o.max_msg, o.window, rma_buffer(o, f));
	for (;;) {
		CtlMsg m = ctl.recv(CtlType{}, &f);
		if (m.type == CtlType::Quit)
			return;
		if (m.type != CtlType::Start)
			throw Error("control channel: unexpected message " +
				    std::to_string(uint32_t(m.type)));
		server_run(f, b, ctl, m);
	}
}

std::string wait_status(pid_t pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return "";
	if (WIFSIGNALED(st))
		return std::string("killed by signal ") + std::to_string(WTERMSIG(st)) + " (" +
		       strsignal(WTERMSIG(st)) + ")";
	if (WIFEXITED(st) && WEXITSTATUS(st))
		return "exit status " + std::to_string(WEXITSTATUS(st));
	return "";
}

} // namespace

int main(int argc, char **argv)
{
	Opts o = parse(argc, argv);
	try {
		test_set(o);
	} catch (const Error &e) {
		std::fprintf(stderr, "fi_efa_bench: %s\n", e.what());
		return 2;
	}
	setvbuf(stdout, nullptr, _IOLBF, 0);

	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		std::perror("fi_efa_bench: socketpair");
		return 2;
	}
	const pid_t parent = getpid();
	std::fflush(nullptr);
	pid_t pid = fork();
	if (pid < 0) {
		std::perror("fi_efa_bench: fork");
		return 2;
	}
	if (pid == 0) {		/* server: never outlives the client */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(2);
		close(sv[0]);
		Ctl ctl(sv[1]);
		try {
			/* The server gives up first, so that the report carries its state. */
			o.stall_s *= 0.75;
			run_server(o, ctl);
		} catch (const Error &e) {
			ctl.send_error(e.what(), e.unavailable);
			_exit(e.unavailable ? 3 : 2);
		}
		_exit(0);
	}
	close(sv[1]);
	Ctl ctl(sv[0]);
	try {
		run_client(o, ctl);
	} catch (const Error &e) {
		std::string why = e.what();
		if (e.peer_gone) {
			std::string st = wait_status(pid);
			if (!st.empty())
				why += ": " + st;
		} else {
			kill(pid, SIGKILL);
			wait_status(pid);
		}
		std::fflush(stdout);
		std::fprintf(stderr, "fi_efa_bench: %s: %s\n", o.label.c_str(), why.c_str());
		std::fflush(stderr);
		_exit(e.unavailable ? 3 : 2);
	}
	std::string st = wait_status(pid);
	if (!st.empty()) {
		std::fprintf(stderr, "fi_efa_bench: %s: server process: %s\n", o.label.c_str(),
			     st.c_str());
		return 2;
	}
	return 0;
}
