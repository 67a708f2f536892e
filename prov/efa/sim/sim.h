/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Internal model of the software EFA device.
 *
 * Object map (one process):
 *
 *   DeviceEntry (static, one per efasimN)      what ibv_get_device_list returns
 *   Runtime (one per device index, refcounted) the "device": lock, engine thread, QP table,
 *                                              MR table, timers, statistics, fault RNG
 *   Context  (ibv_open_device)                  verbs_context + pointer to its Runtime
 *   Pd, Mr, Ah, CompChannel, Cq, Qp             the verbs objects; each starts with the
 *                                              rdma-core struct the application sees
 *   Peer (per QP x remote QP)                   the reliable channel: sequence numbers,
 *                                              in-flight ring, receive window, timers
 *   TxJob (SendOp | ReadResp)                   something that emits packets to a Peer
 *
 * Locking: Runtime::lock protects all device state. Lock order is
 *   Cq::poll_lock -> Qp::send_lock -> Runtime::lock -> CompChannel::lock
 * (send_lock is a spinlock held from ibv_wr_start to ibv_wr_complete, as in rdma-core).
 * CQ rings are single-producer (a holder of Runtime::lock) single-consumer (the holder of
 * Cq::poll_lock), so an application thread iterating a CQ never blocks the device, and may
 * post work while it iterates.
 */
#ifndef EFASIM_SIM_H
#define EFASIM_SIM_H

#include "efa/efadv_compat.h"
#include "efasim.h"
#include "wire.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <array>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#define EFASIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace efasim {

inline uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/* The device's DMA: placing an RDMA write's data in the target's memory, and reading
 * application memory to transmit it (sendmsg straight from registered buffers). On
 * hardware ThreadSanitizer does not see these accesses, and under it the software
 * device keeps them out of its sight too: what orders them with the application's
 * accesses is the network (a peer's completion, then its next request), which no
 * tool in one process can see; and a target may poll memory that an RDMA write fills
 * without any completion. The device's own state, the CQ rings, receive buffers and
 * RDMA read results stay instrumented. Other builds copy with memcpy. */
#if defined(__SANITIZE_THREAD__)
__attribute__((no_sanitize("thread"), noinline, optimize("no-tree-loop-distribute-patterns"))) inline void
dma_copy(void *dst, const void *src, size_t len)
{
	auto *d = static_cast<uint8_t *>(dst);
	auto *s = static_cast<const uint8_t *>(src);
	for (size_t i = 0; i < len; i++)
		d[i] = s[i];
}
#else
inline void dma_copy(void *dst, const void *src, size_t len) { std::memcpy(dst, src, len); }
#endif

/* The lock ibv_wr_start takes and ibv_wr_complete releases, a spinlock as in rdma-core's
 * providers: held between calls, and released by whichever thread completes the batch.
 * A provider that serialises its posts itself may open a batch in one thread (FI_MORE)
 * and ring the doorbell from another (FI_THREAD_SAFE), which a std::mutex forbids. */
class SpinLock {
public:
	void lock()
	{
		while (locked_.exchange(true, std::memory_order_acquire))
			std::this_thread::yield();
	}
	void unlock() { locked_.store(false, std::memory_order_release); }

private:
	std::atomic<bool> locked_{false};
};

/* ------------------------------------------------------------------ EFA status codes */
/* The CQE status codes of EFA devices (vendor_err). shared/reference/efa-device-facts.md */
enum EfaStatus : uint8_t {
	EFA_OK = 0,
	EFA_FLUSHED = 1,
	EFA_LOCAL_QP_INTERNAL_ERROR = 2,
	EFA_LOCAL_UNSUPPORTED_OP = 3,
	EFA_LOCAL_INVALID_AH = 4,
	EFA_LOCAL_INVALID_LKEY = 5,
	EFA_LOCAL_BAD_LENGTH = 6,
	EFA_REMOTE_BAD_ADDRESS = 7,
	EFA_REMOTE_ABORT = 8,
	EFA_REMOTE_BAD_DEST_QPN = 9,
	EFA_REMOTE_RNR = 10,
	EFA_REMOTE_BAD_LENGTH = 11,
	EFA_REMOTE_BAD_STATUS = 12,
	EFA_LOCAL_UNRESP_REMOTE = 13,
	EFA_REMOTE_UNKNOWN_PEER = 14,
	EFA_LOCAL_UNREACH_REMOTE = 15,
	EFA_REMOTE_FEATURE_MISMATCH = 18,
};

ibv_wc_status wc_status_of(uint8_t efa_status);

/* ------------------------------------------------------------------ configuration */
struct Profile {
	const char *name;
	const char *description;
	uint32_t vendor_part_id;
	uint32_t device_caps;       /* EFADV_DEVICE_ATTR_CAPS_* */
	uint16_t inline_buf_size;
	uint16_t inline_buf_size_ex; /* == inline_buf_size: no wide inline */
	bool service_levels;
	/* Queue memory, in entries of the basic size: the send queue holds max_sq_wr
	 * 64-byte entries, or half as many wide (128-byte) ones; the receive queue holds
	 * max_rq_wr scatter/gather descriptors, max_recv_sge per receive. */
	uint32_t max_sq_wr;
	uint32_t max_rq_wr;
	/* Processing hints are accepted on every generation, as rdma-core does (a device
	 * that does not use them ignores them). */
};

struct Config {
	const Profile *profile;
	int num_devices;
	std::vector<in_addr> addrs; /* one per device; the last repeats */
	uint16_t port_base;
	uint16_t port_stride;
	uint32_t max_qp;
	uint32_t first_qpn; /* EFASIM_FIRST_QPN (tests): the QPN the process's first QP tries first */
	uint32_t max_mr; /* memory registrations per process */
	uint32_t mtu;
	uint32_t segment;     /* RDMA payload per datagram */
	uint32_t max_rdma_size;
	uint32_t paths;
	uint32_t window_pkts; /* power of two */
	uint32_t window_bytes;
	uint32_t rto_us;
	uint32_t rto_max_us;
	uint32_t timeout_ms;
	uint32_t rnr_delay_us;
	uint32_t ack_delay_us;
	uint32_t ack_every;
	uint32_t poll_grace_us;
	uint32_t max_peers;
	/* faults */
	double loss;
	double dup;
	uint32_t reorder;
	uint32_t delay_us;
	uint64_t seed;
	bool stats_dump;
	bool copy_on_fork; /* EFASIM_COPY_ON_FORK: the kernel copies registered pages on fork (5.13+) */
	bool loopback_dma; /* EFASIM_LOOPBACK_DMA: RDMA read between QPs of one device by one copy */
	bool gso;          /* EFASIM_GSO: a doorbell's datagrams in one sendmsg (UDP_SEGMENT, UDP_GRO) */
	int log_level;
	std::string error; /* non-empty: a variable was invalid; devices are not offered */
};

/* The configuration, read from the environment at first use and never changed after:
 * config() is on every packet's path, so its fast path is one load, inline. */
extern std::atomic<const Config *> g_config;
const Config &load_config();
inline const Config &config()
{
	if (const Config *c = g_config.load(std::memory_order_acquire)) [[likely]]
		return *c;
	return load_config();
}

/* A number no other QP of this process had (Qp::gen). */
inline uint32_t next_qp_gen()
{
	static std::atomic<uint32_t> n{0};
	return ++n;
}
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The level is tested before the arguments are evaluated (debug lines sit on the
 * packet path). */
#define SIM_LOG(level, ...)                                                                        \
	do {                                                                                       \
		if ((level) <= ::efasim::config().log_level)                                       \
			::efasim::log_msg(level, __VA_ARGS__);                                     \
	} while (0)
#define SIM_WARN(...) SIM_LOG(0, __VA_ARGS__)
#define SIM_INFO(...) SIM_LOG(1, __VA_ARGS__)
#define SIM_DEBUG(...) SIM_LOG(2, __VA_ARGS__)

/* ------------------------------------------------------------------ addressing */
/* GID layout: fe80:0000:PPPP:ef<dev>:0000:0000:<IPv4>, PPPP = the device's port base. */
struct Gid {
	uint8_t raw[16];
	bool operator==(const Gid &o) const { return std::memcmp(raw, o.raw, 16) == 0; }
};

struct GidHash {
	size_t operator()(const Gid &g) const
	{
		uint64_t a, b;
		std::memcpy(&a, g.raw, 8);
		std::memcpy(&b, g.raw + 8, 8);
		return size_t((a * 0x9e3779b97f4a7c15ull) ^ (b + 0x632be59bd9b4e019ull + (a << 6)));
	}
};

struct PeerKey {
	Gid gid;
	uint32_t qpn;
	bool operator==(const PeerKey &o) const { return qpn == o.qpn && gid == o.gid; }
};

struct PeerKeyHash {
	size_t operator()(const PeerKey &k) const { return GidHash{}(k.gid) ^ (size_t(k.qpn) * 0xff51afd7ed558ccdull); }
};
Gid make_gid(in_addr addr, uint16_t port_base, uint8_t dev_index);
bool gid_to_sockaddr(const Gid &gid, uint32_t qpn, sockaddr_in &out);

/* ------------------------------------------------------------------ objects */
struct Runtime;
struct Context;
struct Qp;
struct Cq;
struct Peer;

struct DeviceEntry {
	ibv_device dev; /* first: ibv_device* == DeviceEntry* */
	int index;
};

struct Context {
	verbs_context vctx; /* first; ibv_context is its last member */
	Runtime *rt;
	int async_fd;
	uint64_t magic;
	static constexpr uint64_t kMagic = 0x6566617369637478ull; /* "efasictx" */
	static Context *from(ibv_context *c);
	/* The Context of `c`, or null when `c` is not a software-device context. */
	static Context *checked(ibv_context *c);
};

struct Pd {
	ibv_pd pd;
	Context *ctx;
	/* AH numbers by GID: one AHN per (PD, GID), reference counted, as on hardware. */
	struct AhRef {
		uint16_t ahn;
		uint32_t refs;
	};
	std::unordered_map<Gid, AhRef, GidHash> ah_by_gid;
};

struct Mr {
	ibv_mr mr;
	Pd *pd;
	uint64_t iova;
	int access;
};

struct Ah {
	ibv_ah ah;
	Gid gid;
	uint16_t ahn;
};

struct CompChannel {
	ibv_comp_channel ch;
	std::mutex lock;
	std::deque<Cq *> events;
};

/* A completion as the device writes it; the poll ops read the current one. */
struct Cqe {
	uint64_t wr_id;
	uint32_t byte_len;
	uint32_t imm; /* network byte order */
	uint32_t qp_num;
	uint32_t qp_gen; /* Qp::gen of the QP it belongs to */
	uint32_t src_qp;
	uint16_t slid;
	uint8_t opcode; /* enum ibv_wc_opcode */
	uint8_t status; /* EFA status */
	uint8_t wc_flags;
	uint8_t unsolicited;
	uint8_t has_sgid;
	uint8_t sl; /* always 0, as rdma-core reports it */
	Gid sgid;
};

struct Cq {
	ibv_cq_ex ex; /* first: ibv_cq* == ibv_cq_ex* == Cq* */
	efadv_cq_cur dv;
	Context *ctx;
	Runtime *rt;
	uint64_t wc_flags;
	uint64_t efa_wc_flags;
	/* single-producer single-consumer ring */
	Cqe *ring;
	uint32_t mask;
	std::atomic<uint32_t> head; /* producer */
	std::atomic<uint32_t> tail; /* consumer */
	std::deque<Cqe> overflow;   /* Runtime::lock; entries beyond the ring, in order */
	std::mutex poll_lock;
	Cqe cur;
	bool polling;
	std::atomic<uint64_t> last_poll_ns;
	std::atomic<bool> armed;
	CompChannel *channel;
	std::vector<Qp *> qps; /* Runtime::lock: QPs whose send or recv CQ this is */
	uint32_t comp_events;
	/* Completions of QPs destroyed since they were queued are not reported (as
	 * rdma-core, which finds no QP for them): the generations of those QPs, and how
	 * many QPs still use this CQ. */
	std::atomic<uint32_t> live_qps{0};
	std::atomic<uint32_t> ndead{0};
	std::mutex dead_lock;
	std::vector<uint32_t> dead_gens; /* dead_lock */
	bool is_dead(uint32_t gen)
	{
		std::lock_guard<std::mutex> g(dead_lock);
		return std::find(dead_gens.begin(), dead_gens.end(), gen) != dead_gens.end();
	}

	static Cq *from(ibv_cq *c) { return reinterpret_cast<Cq *>(c); }
	static Cq *from(ibv_cq_ex *c) { return reinterpret_cast<Cq *>(c); }
	static Cq *from_dv(efadv_cq *c);
	bool empty() const { return head.load(std::memory_order_acquire) == tail.load(std::memory_order_relaxed); }
};

struct Sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct RecvWr {
	uint64_t wr_id;
	uint32_t nsge;
	Sge sge[2];
};

enum OpCode : uint8_t { OP_SEND, OP_SEND_IMM, OP_WRITE, OP_WRITE_IMM, OP_READ, OP_READ_RESP };

/* Something that emits data packets into a Peer's channel. */
struct TxJob {
	uint8_t op;      /* OpCode */
	uint8_t status;  /* first error, EFA_OK while fine */
	bool queued;     /* on the peer's transmit queue */
	bool local;      /* SendOp (else ReadResp) */
	Peer *peer;
	TxJob *qnext;
	uint64_t len;
	uint32_t pkts_total; /* packets the job consists of */
	uint32_t pkts_sent;  /* emitted so far */
	uint32_t pkts_out;   /* emitted, not yet acknowledged */
	uint32_t rkey;
	uint64_t raddr;
	uint32_t imm;
};

/* A work request of the send queue, from posting to completion. */
struct SendOp : TxJob {
	Qp *owner;
	uint64_t wr_id;
	uint32_t rqkey; /* destination QKEY of the work request */
	bool signaled;
	bool in_use;
	bool is_inline;
	uint8_t hints;
	uint8_t nsge;
	uint16_t gen;
	uint32_t slot;
	Sge sge[2];
	uint64_t bytes_to_recv; /* RDMA read: response bytes still to place */
	/* RDMA read or write whose packets offered its buffer (loopback DMA): {kDmaMagic, a
	 * value unique to this work request}, which the target reads back before it copies;
	 * zero once the work request ended (transport.cpp, arm_proof). */
	uint64_t dma_proof[2];
	bool pull;              /* RDMA write in segments the target copies itself (plan_write) */
	uint8_t inline_buf[128];
	uint32_t op_id() const { return slot | (uint32_t(gen) << 16); }
};

/* Target side of an RDMA read: streams the response back through the channel. */
struct ReadResp : TxJob {
	uint32_t op_id;
	bool placed; /* the data is in the initiator's buffer already: one PF_PLACED packet */
};

/* One slot of a channel's in-flight ring. */
struct Inflight {
	TxJob *job;
	uint32_t seq;
	uint32_t len;     /* payload bytes */
	uint64_t off;     /* payload offset within the job */
	uint64_t first_ns;
	uint64_t due_ns;  /* retransmission or RNR retry time */
	uint16_t tries;
	uint16_t rnr_tries;
	uint8_t state;    /* IF_FREE, IF_SENT, IF_RNR_WAIT, IF_DONE */
	uint8_t type;     /* PktType */
	uint8_t last;     /* final segment of a write */
	uint8_t path;
};
enum : uint8_t { IF_FREE, IF_SENT, IF_RNR_WAIT, IF_DONE };

inline constexpr uint32_t kRxWindow = 4096; /* receive-side duplicate window, in packets */

/* A NAK the receiver sent for a sequence number it did not mark received. */
struct NakRecord {
	uint32_t seq;
	uint8_t status;
	uint8_t rnr_try; /* RNR: the latest attempt refused */
};

struct Peer {
	Qp *qp;
	Gid gid;
	uint32_t qpn;
	sockaddr_in sa;
	/* transmit channel */
	uint32_t epoch;
	uint32_t next_seq;
	uint32_t una;
	std::vector<Inflight> ring; /* window_pkts slots, indexed by seq & mask */
	uint32_t inflight;
	uint64_t inflight_bytes;
	TxJob *txq_head, *txq_tail;
	uint32_t path_rr;
	bool heard;            /* any packet ever received from this peer */
	bool no_pull;          /* it refused to pull a write's data: stream to it (loopback DMA) */
	bool no_gso;           /* the kernel refused segmentation offload toward it (TxBatch) */
	uint64_t last_rx_ns;
	uint32_t reads_waiting; /* local RDMA reads awaiting response data */
	uint64_t rto_ns;
	uint64_t srtt_ns;
	uint64_t rttvar_ns;
	/* receive channel */
	bool rx_valid;
	uint32_t rx_epoch;
	uint32_t rx_base;      /* every seq below is received (or abandoned by the sender) */
	uint32_t rx_highest;
	/* Bit (seq - rx_base) of the numbers received beyond rx_base, kRxWindow / 64 words;
	 * only while some are (in-order arrivals need none): an idle peer holds none. */
	std::unique_ptr<uint64_t[]> rx_bits;
	uint32_t rx_words;     /* rx_bits[rx_words..] are zero (0: no rx_bits) */
	/* Refused sequence numbers still in the window, in no order: a sender's refused
	 * packets, few at once; none (no allocation) once the sender's una has passed them.
	 * A table by seq % kRxWindow cost 32 KiB per peer, kept by every peer whose refused
	 * packet the sender gave up on until its next packet told us so. */
	std::vector<NakRecord> naks;
	uint32_t ack_pending;
	uint64_t ack_due_ns;
	/* timers */
	bool active;
	uint64_t deadline;
};

struct WrDesc; /* qp.cpp */

struct Qp {
	ibv_qp_ex qpx; /* first: ibv_qp* == ibv_qp_ex* == Qp* */
	efadv_qp dvqp;
	Context *ctx;
	Runtime *rt;
	Pd *pd;
	Cq *scq;
	Cq *rcq;
	uint32_t qpn;
	uint32_t gen; /* unique per QP created in this process */
	int fd;
	uint32_t qkey;
	uint8_t sl;
	uint8_t rnr_retry;
	uint32_t sq_psn;
	uint16_t efa_flags;   /* EFADV_QP_FLAGS_* */
	uint64_t dv_wr_flags; /* EFADV_WR_EX_* */
	uint64_t send_ops;
	bool has_qp_ex;
	bool driver_srd;
	bool ud;              /* an unreliable datagram QP (ud.cpp): no channels, no retransmission */
	uint32_t ud_path_rr;  /* UD: the path of the next datagram */
	int sq_sig_all;
	ibv_qp_cap cap;
	/* work request building: wr_start .. wr_complete hold send_lock */
	SpinLock send_lock;
	std::vector<WrDesc> *batch;
	int session_err;
	/* send queue (Runtime::lock) */
	std::vector<SendOp> sq;
	std::vector<uint32_t> sq_free;
	/* receive queue (Runtime::lock) */
	std::vector<RecvWr> rq;
	uint32_t rq_head, rq_count;
	/* channels (Runtime::lock) */
	std::unordered_map<PeerKey, Peer *, PeerKeyHash> peers;
	Peer *last_peer;
	/* engine */
	bool deferred;
	bool destroying; /* being destroyed: drains stop */
	bool quiet;      /* flushed work produces no completions (reset, destroy) */

	static Qp *from(ibv_qp *q) { return reinterpret_cast<Qp *>(q); }
	static Qp *from(ibv_qp_ex *q) { return reinterpret_cast<Qp *>(q); }
	static Qp *from_dv(efadv_qp *q);
	ibv_qp_state state() const { return qpx.qp_base.state; }
};

/* ------------------------------------------------------------------ the device */
struct Timers; /* runtime.cpp */

struct Runtime {
	int index;
	in_addr addr;
	uint16_t port_base;
	Gid gid;
	int refs;
	uint32_t pid;     /* of the process that opened the device (a fork child opens its own) */
	bool dma_denied;  /* no cross-process copies in this kernel (ENOSYS): no loopback DMA */
	bool dma_refused_logged; /* the info line about a refused copy was written */

	std::mutex lock;
	std::unordered_map<uint32_t, Qp *> qps;
	/* Registered regions by key. Keys come from a 32-bit counter (0 never, a key still
	 * registered never twice), so a revoked key is refused for the next 2^32 - 1
	 * registrations, not after the 256 of an 8-bit generation on a reused slot. */
	std::unordered_map<uint32_t, Mr *> mrs;
	uint32_t next_mr_key = 1;
	uint16_t next_ahn;
	std::vector<Peer *> active; /* peers with timers */
	uint64_t next_deadline;
	std::atomic<uint64_t> timer_hint; /* next_deadline, readable without the lock */
	std::atomic<uint64_t> last_poll_any;

	/* fault injection (Runtime::lock) */
	uint64_t rng;
	struct Held {
		uint64_t due_ns;
		int fd;
		uint32_t after; /* release after this many further datagrams (reordering) */
		sockaddr_in to;
		std::vector<uint8_t> bytes;
	};
	std::deque<Held> held;

	/*
	 * Transmit batching (Runtime::lock; runtime.cpp, TxScope). While a scope is open
	 * (a doorbell of several work requests, a pump of several packets), consecutive
	 * datagrams to one peer wait here
	 * and leave in one sendmsg with UDP segmentation offload: the kernel's cost is per
	 * call and per buffer, not per byte, and a NIC sends a doorbell's packets back to
	 * back too. What is modelled does not change: every datagram is still one packet,
	 * and the receiver sees them one by one (drain splits a coalesced buffer).
	 */
	static constexpr unsigned kGsoMaxSegs = 64;     /* UDP_MAX_SEGMENTS of older kernels */
	static constexpr size_t kGsoMaxBytes = 65000;   /* one IPv4 datagram's payload, with room */
	static constexpr size_t kTxSmall = 256;         /* pieces copied (headers), not referenced */
	struct TxBatch {
		unsigned depth;        /* open TxScopes */
		Peer *peer;            /* destination of what is held; null: nothing */
		unsigned count;        /* datagrams held */
		size_t bytes;
		uint32_t seg;          /* size of each but the last (the first's size) */
		bool closed;           /* the last one is shorter than seg: nothing may follow */
		unsigned niov;
		iovec iov[kGsoMaxSegs * 4];
		uint16_t first[kGsoMaxSegs + 1]; /* iov index of each datagram's first piece */
		size_t arena_used;
		std::unique_ptr<uint8_t[]> arena; /* copies of small pieces (ThreadSanitizer: all) */
	} txb{};
	void flush_tx();
	bool gso_ok; /* EFASIM_GSO and the kernel has UDP_SEGMENT (init_staging) */

	/* receive staging (Runtime::lock) */
	std::unique_ptr<uint8_t[]> rx_mem; /* not written before recvmmsg (init_staging) */
	std::vector<mmsghdr> rx_msgs; /* drain's receive batch, over rx_mem */
	std::vector<iovec> rx_iov;
	std::vector<sockaddr_in> rx_from;
	std::vector<uint8_t> rx_ctl;  /* each slot's control buffer (UDP_GRO's segment size) */
	/* One receive batch's datagrams (a coalesced buffer holds several, cut at the
	 * segment size the kernel reports), and the order drain handles them in. */
	struct RxDgram {
		uint32_t off, len;
		uint8_t slot, path;
	};
	std::vector<RxDgram> rx_dgrams;
	std::unique_ptr<uint8_t[]> rx_scratch; /* a cut datagram whose header is not aligned */
	std::vector<uint16_t> rx_order;
	uint32_t rx_slot;

	/* engine */
	int epfd;
	int evfd;
	std::thread engine;
	std::atomic<bool> stop;
	std::atomic<uint64_t> engine_wake_at;
	std::atomic<bool> engine_has_deferred;

	efasim_stats stats;

	/* --- runtime.cpp */
	static Runtime *acquire(int index);
	static void release(Runtime *rt);
	void engine_main();
	void kick();
	void init_staging();          /* at open: drain's and TxBatch's buffers */
	void drain(Qp *qp);           /* Runtime::lock held */
	void progress_cq(Cq *cq);      /* takes Runtime::lock */
	void run_timers(uint64_t now); /* Runtime::lock held */
	void arm_timer(Peer *p, uint64_t when); /* Runtime::lock held */
	/* Sends one datagram (lock held). With a peer, and a TxScope open, it may wait in
	 * txb for the scope's end (flush_tx). */
	void xmit(Qp *qp, const sockaddr_in &to, const iovec *iov, int iovcnt, Peer *p = nullptr);
	void flush_held(uint64_t now, bool force);
	void register_qp_fd(Qp *qp);
	void unregister_qp_fd(Qp *qp);
	double rand01();

	/* --- transport.cpp (Runtime::lock held) */
	void process_datagram(Qp *qp, const uint8_t *buf, size_t len, const sockaddr_in &from);
	Peer *peer_for(Qp *qp, const Gid &gid, uint32_t qpn, bool create);
	void destroy_peers(Qp *qp);
	void enqueue(Peer *p, TxJob *job);
	void pump(Peer *p);
	void plan_write(Peer *p, SendOp *op); /* segments of an RDMA write (loopback DMA or not) */
	void peer_timer(Peer *p, uint64_t now);
	void send_ack(Peer *p);
	void send_nak(Peer *p, uint32_t seq, uint8_t status, uint8_t rnr_try = 0);
	void complete_send(SendOp *op);
	void fail_peer(Peer *p, uint8_t status);
	void flush_qp(Qp *qp);

	/* --- cq.cpp (Runtime::lock held) */
	/* Queues `e` on `cq` as a completion of `owner` (sets its qp_num and qp_gen). */
	void push_cqe(const Qp *owner, Cq *cq, Cqe &e);

	/* --- device.cpp (Runtime::lock held) */
	Mr *mr_lookup(uint32_t key);
	bool pd_has_ah(Pd *pd, const Gid &gid, uint16_t *ahn);
};

/* Holds the datagrams sent while it lives, to leave as one sendmsg per peer
 * (Runtime::TxBatch). Opened with Runtime::lock held; it must end before the lock is
 * released (declare it after the lock's guard). */
class TxScope {
public:
	/* `on` false: nothing (a single datagram gains nothing from waiting). */
	explicit TxScope(Runtime *rt, bool on = true) : rt_(on ? rt : nullptr)
	{
		if (rt_)
			rt_->txb.depth++;
	}
	~TxScope()
	{
		if (rt_ && --rt_->txb.depth == 0)
			rt_->flush_tx();
	}
	TxScope(const TxScope &) = delete;
	TxScope &operator=(const TxScope &) = delete;

private:
	Runtime *rt_;
};

/*
 * The queue depth rules (efadv_get_max_sq_depth / efadv_get_max_rq_depth, and QP
 * creation): a send queue of wide entries, needed for inline RDMA write or an inline
 * size beyond inline_buf_size, holds half as many; a receive queue holds
 * max_rq_wr / max_recv_sge receives (a power of two).
 */
uint32_t max_sq_depth(const Profile &p, bool inline_write, uint32_t max_inline);
uint32_t max_rq_depth(const Profile &p, uint32_t max_recv_sge);

/* The profile's attributes, as ibv_query_device / efadv_query_device report them. */
void fill_device_attr(ibv_device_attr &a, int index);
void fill_port_attr(ibv_port_attr &a);
void fill_efadv_attr(efadv_device_attr_cur &a);

/* Object constructors shared by the verbs and efadv entry points (null + errno). */
Cq *create_cq(ibv_context *c, ibv_cq_init_attr_ex *attr, uint64_t efa_wc_flags);
Qp *create_srd_qp(ibv_context *c, ibv_qp_init_attr_ex *attr, const efadv_qp_init_attr_cur &efa);

/* The ops behind rdma-core's inline dispatch (ibv_context_ops / verbs_context). */
namespace ops {
int query_port(ibv_context *ctx, uint8_t port, ibv_port_attr *attr, size_t len);
int query_device_ex(ibv_context *ctx, const ibv_query_device_ex_input *in, ibv_device_attr_ex *attr,
		    size_t len);
int req_notify_cq(ibv_cq *cq, int solicited);
int poll_cq(ibv_cq *cq, int n, ibv_wc *wc);
int post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad);
int post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad);
ibv_cq_ex *create_cq_ex(ibv_context *ctx, ibv_cq_init_attr_ex *attr);
ibv_qp *create_qp_ex(ibv_context *ctx, ibv_qp_init_attr_ex *attr);
} // namespace ops

/* Validates a local scatter/gather element against the MR table. */
bool sge_valid(Runtime *rt, Pd *pd, const Sge &s, int need_access);

/* Shared by SRD and UD QPs (qp.cpp): the QP's socket (its QPN), and the ibv_qp_ex
 * work-request builders. */
int qp_open_socket(Runtime *rt, uint32_t &qpn_out);
void qp_set_wr_ops(Qp *qp);

/* Unreliable datagram QPs (ud.cpp). */
Qp *create_ud_qp(ibv_context *c, ibv_qp_init_attr_ex *attr);
int ud_modify_qp(Qp *qp, ibv_qp_attr *attr, int mask);
/* Sends a validated work request as one datagram (Runtime::lock held); it completes at
 * once, whether or not anybody receives it. */
void ud_transmit(Runtime *rt, Qp *qp, const SendOp &op, const Gid &dgid, uint32_t rqpn);
/* A datagram that reached a UD QP, or a UD datagram that reached any QP (lock held). */
void ud_receive(Runtime *rt, Qp *qp, const Parsed &pk, const Gid &sgid);

} // namespace efasim

#endif /* EFASIM_SIM_H */
