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

bool matches(const fi_info *i, const Opts &o)
{
	if (!o.fabric.empty() && (!i->fabric_attr->name || o.fabric != i->fabric_attr->name))
		return false;
	if (!o.domain.empty() && (!i->domain_attr->name || o.domain != i->domain_attr->name))
		return false;
	return true;
}

} // namespace

Fabric::~Fabric()
{
	for (auto &r : regions_) {
		if (r.mr)
			fi_close(&r.mr->fid);
	}
	if (ep_)
		fi_close(&ep_->fid);
	if (av_)
		fi_close(&av_->fid);
	if (cq_)
		fi_close(&cq_->fid);
	if (domain_)
		fi_close(&domain_->fid);
	if (fabric_)
		fi_close(&fabric_->fid);
	if (info_)
		fi_freeinfo(info_);
	for (auto &r : regions_)
		std::free(r.buf);
}

void Fabric::open()
{
	fi_info *hints = fi_allocinfo();
	if (!hints)
		throw Error("fi_allocinfo failed");
	hints->ep_attr->type = o_.dgram ? FI_EP_DGRAM : FI_EP_RDM;
	hints->caps = (o_.tagged ? FI_TAGGED : FI_MSG) | (o_.dgram ? 0 : rma_caps);
	hints->mode = FI_CONTEXT | FI_CONTEXT2 | (o_.dgram ? FI_MSG_PREFIX : 0);
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_VIRT_ADDR | FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->tx_attr->msg_order = 0;	/* the tests do not depend on ordering */
	hints->rx_attr->msg_order = 0;
	hints->fabric_attr->prov_name = strdup(o_.prov.c_str());
	if (!o_.fabric.empty())
		hints->fabric_attr->name = strdup(o_.fabric.c_str());

	const uint32_t version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
	fi_info *list = nullptr;
	int ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &list);
	if (ret == -FI_ENODATA) {	/* no RMA: message tests only */
		hints->caps &= ~rma_caps;
		ret = fi_getinfo(version, nullptr, nullptr, 0, hints, &list);
	}
	fi_freeinfo(hints);
	std::string what = "no " + (o_.fabric.empty() ? std::string() : o_.fabric + " ") +
			   "info from provider " + o_.prov +
			   (o_.domain.empty() ? "" : " on domain " + o_.domain) +
			   (o_.tagged ? " with FI_TAGGED" : "") + (o_.dgram ? " for FI_EP_DGRAM" : "");
	if (ret == -FI_ENODATA)
		throw Error(what, true);
	if (ret)
		fail_fi("fi_getinfo", ret);
	for (fi_info *i = list; i; i = i->next)
		if (matches(i, o_)) {
			info_ = fi_dupinfo(i);
			break;
		}
	fi_freeinfo(list);
	if (!info_)
		throw Error(what, true);

	has_rma = (info_->caps & FI_RMA) != 0;
	inject_size = info_->tx_attr->inject_size;
	max_msg_size = info_->ep_attr->max_msg_size;
	tx_size = info_->tx_attr->size;
	rx_size = info_->rx_attr->size;
	mr_mode = info_->domain_attr->mr_mode;
	msg_order = info_->tx_attr->msg_order;
	if ((info_->mode | info_->tx_attr->mode) & FI_MSG_PREFIX)
		prefix = info_->ep_attr->msg_prefix_size;

	if ((ret = fi_fabric(info_->fabric_attr, &fabric_, nullptr)))
		fail_fi("fi_fabric", ret);
	if ((ret = fi_domain(fabric_, info_, &domain_, nullptr)))
		fail_fi("fi_domain", ret);

	fi_cq_attr cq_attr{};
	cq_attr.format = FI_CQ_FORMAT_MSG;
	cq_attr.wait_obj = FI_WAIT_NONE;
	cq_attr.size = tx_size && rx_size ? tx_size + rx_size : 0;
	if ((ret = fi_cq_open(domain_, &cq_attr, &cq_, nullptr)))
		fail_fi("fi_cq_open", ret);

	fi_av_attr av_attr{};
	av_attr.type = info_->domain_attr->av_type;
	av_attr.count = 2;
	if ((ret = fi_av_open(domain_, &av_attr, &av_, nullptr)))
		fail_fi("fi_av_open", ret);

	if ((ret = fi_endpoint(domain_, info_, &ep_, nullptr)))
		fail_fi("fi_endpoint", ret);
	if ((ret = fi_ep_bind(ep_, &av_->fid, 0)))
		fail_fi("fi_ep_bind(av)", ret);
	if ((ret = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV)))
		fail_fi("fi_ep_bind(cq)", ret);
	if ((ret = fi_enable(ep_)))
		fail_fi("fi_enable", ret);

	ops_.resize(op_pool);
	for (auto &op : ops_)
		free_ops_.push_back(&op);
}

std::string Fabric::describe() const
{
	std::string s = std::string("provider ") + info_->fabric_attr->prov_name + ", fabric " +
			info_->fabric_attr->name + ", domain " + info_->domain_attr->name +
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
	char buf[sizeof(CtlMsg::data)];
	size_t len = sizeof buf;
	int ret = fi_getname(&ep_->fid, buf, &len);
	if (ret)
		fail_fi("fi_getname", ret);
	return std::string(buf, len);
}

void Fabric::insert_peer(const std::string &name)
{
	int ret = fi_av_insert(av_, name.data(), 1, &peer_, 0, nullptr);
	if (ret != 1)
		fail_fi("fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
}

Region Fabric::reg(size_t len, bool remote)
{
	Region r;
	r.len = len;
	size_t alloc = (len + 4095) / 4096 * 4096;
	r.buf = static_cast<char *>(std::aligned_alloc(4096, alloc));
	if (!r.buf)
		throw Error("out of memory allocating " + std::to_string(alloc) + " bytes");
	std::memset(r.buf, 0, alloc);
	regions_.push_back(r);	/* freed by the destructor, even when registering fails */

	uint64_t access = FI_SEND | FI_RECV;
	if (has_rma)
		access |= FI_READ | FI_WRITE | (remote ? FI_REMOTE_READ | FI_REMOTE_WRITE : 0);
	int ret = fi_mr_reg(domain_, r.buf, len, access, 0, next_key_++, 0, &r.mr, nullptr);
	if (ret)
		fail_fi("fi_mr_reg", ret);
	regions_.back().mr = r.mr;
	if (mr_mode & FI_MR_ENDPOINT) {
		if ((ret = fi_mr_bind(r.mr, &ep_->fid, 0)))
			fail_fi("fi_mr_bind", ret);
		if ((ret = fi_mr_enable(r.mr)))
			fail_fi("fi_mr_enable", ret);
	}
	r.desc = fi_mr_desc(r.mr);
	r.key = fi_mr_key(r.mr);
	if (r.key == FI_KEY_NOTAVAIL)
		throw Error("fi_mr_key: key not available (FI_MR_RAW is not supported)");
	r.raddr = (mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(r.buf) : 0;
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
