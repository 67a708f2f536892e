/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Opening one provider selection and the operations the tests use. The application side
 * of every provider requirement the benchmark may meet lives here: FI_CONTEXT/FI_CONTEXT2
 * (a struct fi_context2 per operation), FI_MR_LOCAL (every buffer registered, its
 * descriptor passed), FI_MR_ALLOCATED, FI_MR_PROV_KEY, FI_MR_VIRT_ADDR, FI_MR_ENDPOINT.
 */
#include "bench.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace bench {

namespace {

constexpr uint64_t data_tag = 0x1, ctl_tag = 0x2;
constexpr uint64_t rma_caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr int op_pool = 4096;

std::string mr_mode_str(uint64_t m)
{
	static const struct { uint64_t bit; const char *name; } bits[] = {
		{FI_MR_LOCAL, "LOCAL"}, {FI_MR_RAW, "RAW"}, {FI_MR_VIRT_ADDR, "VIRT_ADDR"},
		{FI_MR_ALLOCATED, "ALLOCATED"}, {FI_MR_PROV_KEY, "PROV_KEY"},
		{FI_MR_MMU_NOTIFY, "MMU_NOTIFY"}, {FI_MR_RMA_EVENT, "RMA_EVENT"},
		{FI_MR_ENDPOINT, "ENDPOINT"}, {FI_MR_HMEM, "HMEM"},
	};
	std::string s;
	for (auto &b : bits)
		if (m & b.bit)
			s += (s.empty() ? "" : "|") + std::string(b.name);
	return s.empty() ? "none" : s;
}

} // namespace

Fabric::~Fabric() = default; /* obj_ closes the regions, then memory_ frees them */

void Fabric::open()
{
	Selection sel;
	sel.prov = o_.prov;
	sel.fabric = o_.fabric;
	sel.domain = o_.domain;
	sel.type = o_.dgram ? FI_EP_DGRAM : FI_EP_RDM;
	sel.caps = o_.tagged ? FI_TAGGED : FI_MSG;
	sel.optional_caps = o_.dgram ? 0 : rma_caps; /* without RMA: message tests only */
	sel.mode = FI_CONTEXT | FI_CONTEXT2 | (o_.dgram ? FI_MSG_PREFIX : 0);
	sel.cq_format = FI_CQ_FORMAT_MSG;
	sel.av_count = 2;
	obj_.open(sel);
	cq_ = obj_.cq();
	ep_ = obj_.ep();

	const fi_info *info = obj_.info();
	has_rma = (info->caps & FI_RMA) != 0;
	inject_size = info->tx_attr->inject_size;
	max_msg_size = info->ep_attr->max_msg_size;
	tx_size = info->tx_attr->size;
	rx_size = info->rx_attr->size;
	mr_mode = info->domain_attr->mr_mode;
	msg_order = info->tx_attr->msg_order;
	if ((info->mode | info->tx_attr->mode) & FI_MSG_PREFIX)
		prefix = info->ep_attr->msg_prefix_size;

	ops_.resize(op_pool);
	for (auto &op : ops_)
		free_ops_.push_back(&op);
}

std::string Fabric::describe() const
{
	const fi_info *info = obj_.info();
	std::string s = std::string("provider ") + info->fabric_attr->prov_name + ", fabric " +
			info->fabric_attr->name + ", domain " + info->domain_attr->name +
			", caps " + (o_.tagged ? "tagged" : "msg") + (has_rma ? "+rma" : "") +
			", inject " + std::to_string(inject_size) + ", max_msg " +
			std::to_string(max_msg_size) + ", tx/rx size " + std::to_string(tx_size) +
			"/" + std::to_string(rx_size) + ", mr_mode " + mr_mode_str(mr_mode) +
			", ordered sends " + ((msg_order & FI_ORDER_SAS) ? "yes" : "no") +
			(o_.dgram ? ", FI_EP_DGRAM, prefix " + std::to_string(prefix) : "");
	return s;
}

std::string Fabric::local_name()
{
	std::vector<uint8_t> name = obj_.name();
	if (name.size() > sizeof(CtlMsg::data))
		throw Error("fi_getname: a " + std::to_string(name.size()) + "-byte endpoint name does not fit the " +
			    std::to_string(sizeof(CtlMsg::data)) + "-byte hello message");
	return std::string(name.begin(), name.end());
}

void Fabric::insert_peer(const std::string &name)
{
	peer_ = obj_.insert(name.data());
}

Region Fabric::reg(size_t len, bool remote)
{
	Region r;
	r.len = len;
	size_t alloc = (len + 4095) / 4096 * 4096;
	r.buf = static_cast<char *>(std::aligned_alloc(4096, alloc));
	if (!r.buf)
		throw Error("out of memory allocating " + std::to_string(alloc) + " bytes");
	memory_.emplace_back(r.buf); /* freed by the destructor, even when registering fails */
	std::memset(r.buf, 0, alloc);

	uint64_t access = FI_SEND | FI_RECV;
	if (has_rma)
		access |= FI_READ | FI_WRITE | (remote ? FI_REMOTE_READ | FI_REMOTE_WRITE : 0);
	r.mr = obj_.reg(r.buf, len, access);
	r.desc = fi_mr_desc(r.mr);
	r.key = fi_mr_key(r.mr);
	r.raddr = obj_.remote_addr(r.buf);
	return r;
}

/* ------------------------------------------------------------------ operations */
Fabric::Op *Fabric::get_op(Kind k, uint32_t slot)
{
	if (free_ops_.empty())
		throw Error("internal: operation context pool exhausted");
	Op *op = free_ops_.back();
	free_ops_.pop_back();
	std::memset(&op->ctx, 0, sizeof op->ctx);
	op->kind = k;
	op->slot = slot;
	return op;
}

void Fabric::progress_pending()
{
	Completion c[16];
	int n = read_cq(c, 16);
	pending_.insert(pending_.end(), c, c + n);
	if (!n)
		watchdog_idle();
}

void Fabric::post_recv(void *payload, size_t plen, void *desc, Kind k, uint32_t slot)
{
	void *buf = static_cast<char *>(payload) - prefix;
	const size_t len = plen + prefix;
	Op *op = get_op(k, slot);
	last_progress_ = Clock::now();
	for (;;) {
		ssize_t ret = o_.tagged ? fi_trecv(ep_, buf, len, desc, peer_,
						   k == RxCtl ? ctl_tag : data_tag, 0, &op->ctx)
					: fi_recv(ep_, buf, len, desc, peer_, &op->ctx);
		if (!ret)
			return;
		if (ret != -FI_EAGAIN)
			fail_fi(o_.tagged ? "fi_trecv" : "fi_recv", ret);
		progress_pending();
	}
}

bool Fabric::post_send(const void *payload, size_t plen, void *desc, Kind k, uint32_t slot)
{
	const void *buf = static_cast<const char *>(payload) - prefix;
	const size_t len = plen + prefix;
	const uint64_t tag = k == TxCtl ? ctl_tag : data_tag;
	last_progress_ = Clock::now();	/* the stall clock runs from the last post or completion */
	if (plen <= inject_size) {
		for (;;) {
			ssize_t ret = o_.tagged ? fi_tinject(ep_, buf, len, peer_, tag)
						: fi_inject(ep_, buf, len, peer_);
			if (!ret)
				return false;
			if (ret != -FI_EAGAIN)
				fail_fi(o_.tagged ? "fi_tinject" : "fi_inject", ret);
			progress_pending();
		}
	}
	Op *op = get_op(k, slot);
	for (;;) {
		ssize_t ret = o_.tagged ? fi_tsend(ep_, buf, len, desc, peer_, tag, &op->ctx)
					: fi_send(ep_, buf, len, desc, peer_, &op->ctx);
		if (!ret)
			return true;
		if (ret != -FI_EAGAIN)
			fail_fi(o_.tagged ? "fi_tsend" : "fi_send", ret);
		progress_pending();
	}
}

int Fabric::post_rma(bool write, void *buf, size_t len, void *desc, uint64_t raddr,
		     uint64_t key, uint64_t flags)
{
	Op *op = get_op(RmaOp, 0);
	last_progress_ = Clock::now();
	for (;;) {
		ssize_t ret;
		if (flags) {
			iovec iov{buf, len};
			fi_rma_iov rma{raddr, len, key};
			fi_msg_rma msg{};
			msg.msg_iov = &iov;
			msg.desc = &desc;
			msg.iov_count = 1;
			msg.addr = peer_;
			msg.rma_iov = &rma;
			msg.rma_iov_count = 1;
			msg.context = &op->ctx;
			ret = write ? fi_writemsg(ep_, &msg, flags | FI_COMPLETION)
				    : fi_readmsg(ep_, &msg, flags | FI_COMPLETION);
		} else {
			ret = write ? fi_write(ep_, buf, len, desc, peer_, raddr, key, &op->ctx)
				    : fi_read(ep_, buf, len, desc, peer_, raddr, key, &op->ctx);
		}
		if (!ret)
			return 0;
		if (ret != -FI_EAGAIN) {
			if (flags) {
				free_ops_.push_back(op);
				return int(ret);
			}
			fail_fi(write ? "fi_write" : "fi_read", ret);
		}
		progress_pending();
	}
}

int Fabric::read_cq(Completion *out, int max)
{
	fi_cq_msg_entry e[16];
	ssize_t n = fi_cq_read(cq_, e, size_t(std::min(max, 16)));
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		fi_cq_err_entry err{};
		ssize_t r = fi_cq_readerr(cq_, &err, 0);
		if (r < 0)
			fail_fi("fi_cq_readerr", r);
		const Op *op = static_cast<const Op *>(err.op_context);
		char buf[256];
		const char *pe = fi_cq_strerror(cq_, err.prov_errno, err.err_data, buf, sizeof buf);
		throw Error(std::string("completion error on ") + (op ? kind_name(op->kind) : "?") +
			    ": " + fi_strerror(err.err) + " (provider: " + (pe ? pe : "?") + ")");
	}
	if (n < 0)
		fail_fi("fi_cq_read", n);
	for (ssize_t i = 0; i < n; i++) {
		Op *op = static_cast<Op *>(e[i].op_context);
		if (!op)
			throw Error("completion without a context");
		/* A receive's length counts the message prefix. */
		const bool rx = op->kind == RxData || op->kind == RxCtl;
		out[i] = Completion{op->kind, op->slot, rx && e[i].len >= prefix ? e[i].len - prefix : e[i].len};
		free_ops_.push_back(op);
	}
	if (n > 0) {
		idle_ = 0;
		last_progress_ = Clock::now();
	}
	return int(n);
}

void Fabric::watchdog_idle()
{
	++idle_;
	/* On a machine with fewer free cores than polling processes, let the peer run now
	 * rather than at the end of this time slice. Without contention this returns at once. */
	if (o_.yield_every && idle_ % o_.yield_every == 0)
		sched_yield();
	if (idle_ % 16384)
		return;
	ctl_.check_peer();
	if (seconds_since(last_progress_) > o_.stall_s)
		throw Error("stalled: no completion for " + std::to_string(int(o_.stall_s)) + " s");
}

void Fabric::progress()
{
	Completion c[4];
	if (read_cq(c, 4))
		throw Error(std::string("unexpected ") + kind_name(c[0].kind) +
			    " completion between measurements");
	if (o_.yield_every && ++idle_ % o_.yield_every == 0)
		sched_yield();
}

int Fabric::poll(Completion *out, int max)
{
	if (!pending_.empty()) {
		int n = int(std::min<size_t>(size_t(max), pending_.size()));
		std::copy(pending_.begin(), pending_.begin() + n, out);
		pending_.erase(pending_.begin(), pending_.begin() + n);
		return n;
	}
	int n = read_cq(out, max);
	if (!n)
		watchdog_idle();
	return n;
}

} // namespace bench
