/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fi_efa_bench: provider-level benchmark over the public libfabric API (fi_*) only.
 *
 * Two processes (this one, the client, and a forked peer, the server) talk over a
 * socketpair for set-up and per-measurement hand-shakes (never inside a timed region),
 * and over the fabric for everything that is measured. Both sides busy-poll their
 * completion queue (FI_WAIT_NONE).
 */
#pragma once

#include "endpoint.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0)
{
	return std::chrono::duration<double>(Clock::now() - t0).count();
}

/* The same failure, with the state of the test that met it (for stalls above all). */
inline Error annotate(const Error &e, const std::string &state)
{
	return Error(std::string(e.what()) + " [" + state + "]", e.unavailable, e.peer_gone);
}

enum class Test : uint32_t { Latency = 1, Bandwidth, MsgRate, RmaWrite, RmaRead };

struct Opts {
	std::string prov;		/* -p */
	std::string fabric;		/* -F (also selects among returned infos) */
	std::string domain;		/* -d (selects among returned infos) */
	std::string label;		/* -L: first CSV column */
	bool tagged = false;		/* -m tagged */
	bool dgram = false;		/* -e dgram: FI_EP_DGRAM (message tests only) */
	bool quick = false;		/* --quick */
	bool csv = false;		/* --csv */
	uint64_t iters = 0;		/* -I: fixed iteration count; 0 = time-calibrated */
	double target_s = 0;		/* -T: seconds per timed run when calibrating */
	uint32_t reps = 3;		/* -R: timed runs per measurement; the fastest counts */
	uint32_t window = 64;		/* -w: outstanding sends (bandwidth, message rate) */
	uint32_t rma_window = 8;	/* -W: outstanding RMA operations */
	size_t max_msg = 8192;		/* -S: largest message size (clamped to max_msg_size) */
	size_t min_msg = 1;		/* --min: smallest message size of the message tests */
	size_t max_rma = 0;		/* --max-rma: override the RMA clamp (default max_msg_size) */
	std::string tests = "lat,bw,rate,write,read";	/* -t */
	uint32_t yield_every = 64;	/* --yield: sched_yield() after this many empty polls */
	double stall_s = 60;		/* --stall: give up after this long without a completion */
};

/* ------------------------------------------------------------------ control channel */
enum class CtlType : uint32_t { Hello = 1, Start, Ready, Done, Error, Quit };
class Fabric;

struct CtlMsg {
	CtlType type{};
	uint32_t test = 0;
	uint64_t size = 0, iters = 0, window = 0, verify = 0;
	/* Hello: a = has FI_RMA, c = rx queue size, data = endpoint name;
	 * Ready (RMA): a = remote address, b = key; Error: a = unavailable, data = text */
	uint64_t a = 0, b = 0, c = 0;
	uint32_t len = 0;			/* bytes used in data */
	char data[476] = {};
	void set_data(const void *p, size_t n);
	std::string data_str() const { return std::string(data, len); }
};

class Ctl {
public:
	explicit Ctl(int fd) : fd_(fd) {}
	void send(const CtlMsg &m);
	/* Blocking; CtlType{} takes any; a peer's Error is thrown. With a fabric, its
	 * completion queue is polled while waiting: a provider with manual progress may
	 * still owe the peer data (an injected message, a retransmission, an ack). */
	CtlMsg recv(CtlType expect, Fabric *progress = nullptr);
	void check_peer();		/* non-blocking: throws if the peer failed or exited */
	void send_error(const std::string &what, bool unavailable) noexcept;
	int fd() const { return fd_; }

private:
	[[noreturn]] void throw_peer_error(const CtlMsg &m);
	int fd_;
};

/* ------------------------------------------------------------------ fabric */
enum Kind : uint32_t { TxData = 1, RxData, TxCtl, RxCtl, RmaOp };
const char *kind_name(uint32_t k);

struct Completion {
	uint32_t kind;
	uint32_t slot;
	size_t len;
};

/* A registered buffer. raddr is what a peer passes as the remote address. */
struct Region {
	char *buf = nullptr;
	size_t len = 0;
	fid_mr *mr = nullptr;
	void *desc = nullptr;
	uint64_t raddr = 0;
	uint64_t key = 0;
};

class Fabric {
public:
	Fabric(const Opts &o, Ctl &ctl) : o_(o), ctl_(ctl) {}
	~Fabric();
	Fabric(const Fabric &) = delete;
	Fabric &operator=(const Fabric &) = delete;

	void open();				/* fi_getinfo .. fi_enable */
	std::string local_name();
	void insert_peer(const std::string &name);
	Region reg(size_t len, bool remote);	/* allocate, touch and register */

	void post_recv(void *buf, size_t len, void *desc, Kind k, uint32_t slot);
	/* fi_inject when len <= inject_size (returns false: no completion), else fi_send. */
	bool post_send(const void *buf, size_t len, void *desc, Kind k, uint32_t slot);
	/* flags != 0: fi_writemsg/fi_readmsg with flags | FI_COMPLETION; returns the
	 * provider's error for flagged ops instead of throwing, so callers can fall back. */
	int post_rma(bool write, void *buf, size_t len, void *desc, uint64_t raddr, uint64_t key,
		     uint64_t flags = 0);
	int poll(Completion *out, int max);	/* includes the stall / peer watchdog */
	void progress();			/* between measurements: expects no completion */

	std::string describe() const;
	size_t inject_size = 0, max_msg_size = 0, tx_size = 0, rx_size = 0;
	/* FI_MSG_PREFIX (DGRAM): bytes the provider owns in front of every message buffer.
	 * post_send/post_recv take the payload and hand the provider the prefix in front of
	 * it; receive completions report the payload's length. */
	size_t prefix = 0;
	uint64_t mr_mode = 0, msg_order = 0;
	bool has_rma = false;

private:
	struct Op {
		fi_context2 ctx;	/* first: the pointer passed to the provider */
		uint32_t kind, slot;
	};
	Op *get_op(Kind k, uint32_t slot);
	void progress_pending();	/* reap completions while a post is refused */
	int read_cq(Completion *out, int max);
	void watchdog_idle();

	struct FreeMem {
		void operator()(char *p) const { std::free(p); }
	};

	const Opts &o_;
	Ctl &ctl_;
	std::vector<std::unique_ptr<char, FreeMem>> memory_; /* the regions' buffers */
	Endpoint obj_; /* declared after memory_: its regions are closed first */
	fid_cq *cq_ = nullptr; /* obj_'s, for the data path */
	fid_ep *ep_ = nullptr;
	fi_addr_t peer_ = FI_ADDR_UNSPEC;
	std::vector<Op> ops_;
	std::vector<Op *> free_ops_;
	std::vector<Completion> pending_;
	uint64_t idle_ = 0;
	Clock::time_point last_progress_ = Clock::now();
};

/* ------------------------------------------------------------------ buffers and tests */
/* Everything one side needs, registered once: a message region (transmit buffer,
 * receive slots, control slots) and, when RMA is tested, a large RMA region. */
struct Bufs {
	Region msg, rma;
	size_t slot = 0;	/* bytes per receive slot */
	size_t gap = 0;		/* room for the message prefix before every buffer (DGRAM) */
	uint32_t rx_slots = 0;
	static constexpr size_t ctl_len = 8;
	static constexpr uint32_t ctl_slots = 8;
	char *tx() const { return msg.buf + gap; }
	char *rx(uint32_t i) const { return msg.buf + (slot + gap) * (1 + i) + gap; }
	char *ctl_tx() const { return msg.buf + (slot + gap) * (1 + rx_slots) + gap; }
	char *ctl_rx(uint32_t i) const { return ctl_tx() + (64 + gap) * (1 + i); }
	void alloc(Fabric &f, size_t max_msg, uint32_t window, size_t max_rma);
};

/* Pattern helpers: the data depends on the position, the size and a salt, never on
 * which message it is, so that unordered delivery verifies just the same. */
void fill(char *p, size_t n, uint32_t salt);
void verify(const char *p, size_t n, uint32_t salt, const char *what);

struct RunResult {
	double seconds = 0;		/* client: first post .. final ack */
	std::vector<double> rtt_us;	/* latency only */
	std::string note;
};

/* The client sends Start, waits for Ready (the server has pre-posted its receives),
 * runs, then waits for Done. The server runs the other half. */
RunResult client_run(Fabric &f, Bufs &b, Ctl &ctl, Test t, size_t size, uint64_t iters,
		     uint32_t window, bool verify);
void server_run(Fabric &f, Bufs &b, Ctl &ctl, const CtlMsg &start);

/* Halves of each test (tests.cpp). */
RunResult pingpong_client(Fabric &f, Bufs &b, size_t size, uint64_t iters, bool verify);
void pingpong_server(Fabric &f, Bufs &b, Ctl &ctl, size_t size, uint64_t iters, bool verify);
RunResult stream_client(Fabric &f, Bufs &b, size_t size, uint64_t iters, uint32_t w, bool verify);
void stream_server(Fabric &f, Bufs &b, Ctl &ctl, size_t size, uint64_t iters, uint32_t w,
		   bool verify);
RunResult rma_client(Fabric &f, Bufs &b, bool write, size_t size, uint64_t iters, uint32_t w,
		     bool verify, uint64_t raddr, uint64_t key);
void rma_server(Fabric &f, Bufs &b, Ctl &ctl, bool write, size_t size, bool verify);

} // namespace bench
