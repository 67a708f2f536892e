/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Configuration of the software EFA device: capability profiles and the EFASIM_*
 * environment variables (documented in man/efasim.7.md), read once per process.
 */
#include "sim.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace efasim {

namespace {

constexpr uint32_t kCapsAll = EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RNR_RETRY |
			      EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID | EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE |
			      EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV;

/* Device generations, newest first. The first is the default. */
const Profile kProfiles[] = {
	{"default", "newest generation: RDMA read/write, unsolicited write recv, 80-byte inline, "
		    "INLINE_WRITE, service levels",
	 0xefa3, kCapsAll, 32, 80, true, 4096, 32768},
	{"no-unsolicited", "RDMA read/write, no unsolicited write recv",
	 0xefa2, kCapsAll & ~EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV, 32, 80, true, 4096, 32768},
	{"inline32", "all capabilities but 32-byte inline only (no wide inline)",
	 0xefa2, kCapsAll, 32, 32, true, 4096, 32768},
	{"no-rdma-write", "first RDMA generation: RDMA read only, 32-byte inline",
	 0xefa1,
	 EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RNR_RETRY |
		 EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID,
	 32, 32, false, 4096, 32768},
	{"no-rdma", "first generation: sends only, no RDMA, 32-byte inline",
	 0xefa0, EFADV_DEVICE_ATTR_CAPS_RNR_RETRY | EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID, 32, 32, false, 4096,
	 32768},
};

bool parse_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t &out, std::string &err)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return false;
	char *end = nullptr;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	if (errno || *end || x < lo || x > hi) {
		err += std::string(name) + "='" + v + "' is not an integer in [" + std::to_string(lo) +
		       ", " + std::to_string(hi) + "]; ";
		return false;
	}
	out = x;
	return true;
}

template <typename T> void get_int(const char *name, uint64_t lo, uint64_t hi, T &field, std::string &err)
{
	uint64_t v;
	if (parse_u64(name, lo, hi, v, err))
		field = T(v);
}

/* A probability: "0.01", "1%" */
void get_prob(const char *name, double &field, std::string &err)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return;
	char *end = nullptr;
	double x = strtod(v, &end);
	if (end && *end == '%') {
		x /= 100.0;
		end++;
	}
	if (!end || *end || !(x >= 0.0 && x < 1.0)) {
		err += std::string(name) + "='" + v + "' is not a probability in [0, 1) (e.g. 0.01 or 1%); ";
		return;
	}
	field = x;
}

int parse_log_level(const char *v)
{
	if (!v || !*v)
		return 0;
	if (!strcmp(v, "warn") || !strcmp(v, "0"))
		return 0;
	if (!strcmp(v, "info") || !strcmp(v, "1"))
		return 1;
	if (!strcmp(v, "debug") || !strcmp(v, "2"))
		return 2;
	return 0;
}

Config load()
{
	Config c{};
	std::string err;
	c.profile = &kProfiles[0];
	c.num_devices = 1;
	c.port_base = 20000;
	c.port_stride = 2048;
	c.max_qp = 1024;
	c.max_mr = 1u << 20;
	c.mtu = 8928;
	c.segment = 32768;
	c.max_rdma_size = 1u << 30;
	c.paths = 4;
	c.window_pkts = 256;
	c.window_bytes = 4u << 20;
	c.rto_us = 1000;
	c.rto_max_us = 100000;
	c.timeout_ms = 5000;
	c.rnr_delay_us = 100;
	c.ack_delay_us = 50;
	c.ack_every = 16;
	c.poll_grace_us = 200;
	c.max_peers = 65536;
	c.seed = 1;
	c.log_level = parse_log_level(getenv("EFASIM_LOG"));

	if (const char *p = getenv("EFASIM_PROFILE"); p && *p) {
		const Profile *found = nullptr;
		for (const auto &pr : kProfiles)
			if (!strcmp(pr.name, p))
				found = &pr;
		if (found) {
			c.profile = found;
		} else {
			err += std::string("EFASIM_PROFILE='") + p + "' is unknown (known:";
			for (const auto &pr : kProfiles)
				err += std::string(" ") + pr.name;
			err += "); ";
		}
	}
	get_int("EFASIM_DEVICES", 1, 16, c.num_devices, err);
	get_int("EFASIM_PORT_BASE", 1024, 65535, c.port_base, err);
	get_int("EFASIM_MAX_QP", 1, 2047, c.max_qp, err);
	get_int("EFASIM_FIRST_QPN", 0, 2047, c.first_qpn, err);
	get_int("EFASIM_MAX_MR", 1, 1u << 20, c.max_mr, err);
	get_int("EFASIM_MTU", 256, 9000, c.mtu, err);
	get_int("EFASIM_SEGMENT", 1024, 65000, c.segment, err);
	get_int("EFASIM_MAX_RDMA_SIZE", 4096, 1u << 30, c.max_rdma_size, err);
	get_int("EFASIM_PATHS", 1, 16, c.paths, err);
	get_int("EFASIM_WINDOW", 4, 2048, c.window_pkts, err);
	get_int("EFASIM_WINDOW_BYTES", 65536, 1u << 30, c.window_bytes, err);
	get_int("EFASIM_RTO_US", 50, 10000000, c.rto_us, err);
	get_int("EFASIM_RTO_MAX_US", 50, 60000000, c.rto_max_us, err);
	get_int("EFASIM_TIMEOUT_MS", 1, 3600000, c.timeout_ms, err);
	get_int("EFASIM_RNR_DELAY_US", 1, 10000000, c.rnr_delay_us, err);
	get_int("EFASIM_ACK_DELAY_US", 0, 1000000, c.ack_delay_us, err);
	get_int("EFASIM_ACK_EVERY", 1, 1024, c.ack_every, err);
	get_int("EFASIM_POLL_GRACE_US", 0, 1000000, c.poll_grace_us, err);
	get_int("EFASIM_MAX_PEERS", 1, 1u << 24, c.max_peers, err);
	get_prob("EFASIM_LOSS", c.loss, err);
	get_prob("EFASIM_DUP", c.dup, err);
	get_int("EFASIM_REORDER", 0, 1024, c.reorder, err);
	get_int("EFASIM_DELAY_US", 0, 10000000, c.delay_us, err);
	get_int("EFASIM_SEED", 0, UINT64_MAX, c.seed, err);
	uint64_t stats = 0;
	if (parse_u64("EFASIM_STATS", 0, 1, stats, err))
		c.stats_dump = stats != 0;
	uint64_t cow = 1;
	parse_u64("EFASIM_COPY_ON_FORK", 0, 1, cow, err);
	c.copy_on_fork = cow != 0;
	uint64_t dma = 1;
	parse_u64("EFASIM_LOOPBACK_DMA", 0, 1, dma, err);
	c.loopback_dma = dma != 0;
	uint64_t gso = 1;
	parse_u64("EFASIM_GSO", 0, 1, gso, err);
	c.gso = gso != 0;

	/* The in-flight ring is indexed by seq & (window - 1). */
	uint32_t w = 4;
	while (w < c.window_pkts)
		w <<= 1;
	c.window_pkts = w;
	if (c.window_pkts > kRxWindow / 2)
		c.window_pkts = kRxWindow / 2;
	if (c.rto_max_us < c.rto_us)
		c.rto_max_us = c.rto_us;
	if (uint32_t(c.port_base) + uint32_t(c.num_devices) * c.port_stride > 65536) {
		c.port_stride = uint16_t((65536 - c.port_base) / c.num_devices);
		if (c.port_stride <= c.max_qp)
			err += "EFASIM_PORT_BASE leaves too few ports for EFASIM_DEVICES x EFASIM_MAX_QP; ";
	}

	const char *addrs = getenv("EFASIM_ADDR");
	std::string list = addrs && *addrs ? addrs : "127.0.0.1";
	size_t pos = 0;
	while (pos <= list.size()) {
		size_t comma = list.find(',', pos);
		std::string one = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
		in_addr a{};
		if (inet_pton(AF_INET, one.c_str(), &a) != 1) {
			err += "EFASIM_ADDR entry '" + one + "' is not an IPv4 address; ";
			break;
		}
		c.addrs.push_back(a);
		if (comma == std::string::npos)
			break;
		pos = comma + 1;
	}
	if (c.addrs.empty())
		c.addrs.push_back(in_addr{htonl(INADDR_LOOPBACK)});
	c.error = err;
	return c;
}

} // namespace

std::atomic<const Config *> g_config{nullptr};

const Config &load_config()
{
	/* Never destroyed: an engine thread may still read it while the process exits. */
	static const Config *c = [] {
		auto *x = new Config(load());
		if (!x->error.empty())
			fprintf(stderr,
				"efasim: invalid configuration, the software EFA device is disabled: %s"
				"see efasim(7)\n",
				x->error.c_str());
		g_config.store(x, std::memory_order_release);
		return x;
	}();
	return *c;
}

void log_msg(int level, const char *fmt, ...)
{
	if (level > config().log_level)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	const uint64_t us = now_ns() / 1000;
	fprintf(stderr, "efasim[%d] %lu.%06lu: %s\n", int(getpid()), (unsigned long)(us / 1000000 % 1000),
		(unsigned long)(us % 1000000), buf);
}

ibv_wc_status wc_status_of(uint8_t s)
{
	switch (s) {
	case EFA_OK: return IBV_WC_SUCCESS;
	case EFA_FLUSHED: return IBV_WC_WR_FLUSH_ERR;
	case EFA_LOCAL_QP_INTERNAL_ERROR:
	case EFA_LOCAL_UNSUPPORTED_OP:
	case EFA_LOCAL_INVALID_AH: return IBV_WC_LOC_QP_OP_ERR;
	case EFA_LOCAL_INVALID_LKEY: return IBV_WC_LOC_PROT_ERR;
	case EFA_LOCAL_BAD_LENGTH: return IBV_WC_LOC_LEN_ERR;
	case EFA_REMOTE_BAD_ADDRESS: return IBV_WC_REM_ACCESS_ERR;
	case EFA_REMOTE_ABORT: return IBV_WC_REM_ABORT_ERR;
	case EFA_REMOTE_BAD_DEST_QPN: return IBV_WC_REM_INV_RD_REQ_ERR;
	case EFA_REMOTE_RNR: return IBV_WC_RNR_RETRY_EXC_ERR;
	case EFA_REMOTE_BAD_LENGTH: return IBV_WC_REM_INV_REQ_ERR;
	case EFA_REMOTE_BAD_STATUS: return IBV_WC_BAD_RESP_ERR;
	case EFA_LOCAL_UNRESP_REMOTE: return IBV_WC_RESP_TIMEOUT_ERR;
	case EFA_REMOTE_UNKNOWN_PEER: return IBV_WC_REM_OP_ERR;
	case EFA_LOCAL_UNREACH_REMOTE: return IBV_WC_RESP_TIMEOUT_ERR;
	case EFA_REMOTE_FEATURE_MISMATCH: return IBV_WC_REM_INV_REQ_ERR;
	default: return IBV_WC_GENERAL_ERR;
	}
}

Gid make_gid(in_addr addr, uint16_t port_base, uint8_t dev_index)
{
	Gid g{};
	g.raw[0] = 0xfe;
	g.raw[1] = 0x80;
	g.raw[4] = uint8_t(port_base >> 8);
	g.raw[5] = uint8_t(port_base);
	g.raw[6] = 0xef;
	g.raw[7] = dev_index;
	std::memcpy(&g.raw[12], &addr.s_addr, 4);
	return g;
}

bool gid_to_sockaddr(const Gid &gid, uint32_t qpn, sockaddr_in &out)
{
	if (gid.raw[0] != 0xfe || gid.raw[1] != 0x80 || gid.raw[6] != 0xef)
		return false;
	uint32_t port = (uint32_t(gid.raw[4]) << 8 | gid.raw[5]) + qpn;
	if (qpn == 0 || port > 65535)
		return false;
	out = sockaddr_in{};
	out.sin_family = AF_INET;
	out.sin_port = htons(uint16_t(port));
	std::memcpy(&out.sin_addr.s_addr, &gid.raw[12], 4);
	return true;
}

} // namespace efasim

EFASIM_EXPORT const char *efasim_profile_name(void) { return efasim::config().profile->name; }
