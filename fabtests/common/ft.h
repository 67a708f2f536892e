/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Functional tests over the public libfabric API: options, failure reporting, deadlines
 * and data patterns. Every test is a server and a client process started by
 * fabtests/run_pair.sh; the pieces they share live in this directory:
 *
 *   ft.h          options, checks, deadlines, patterns (this file)
 *   ft_fabric.h   getinfo with hints, fabric / domain / AV
 *   ft_cq.h       completion queues: waiting with a bound, error reports
 *   ft_ep.h       endpoints with their CQs, posting with -FI_EAGAIN retry
 *   ft_mr.h       registered buffers and the remote view of them
 *   ft_oob.h      the out-of-band TCP control channel (127.0.0.1)
 *
 * A failed check prints what failed and where, prefixed by the role, and exits 1; a
 * test that cannot run because the provider does not advertise what it needs exits 77.
 */
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>
#include <rdma/fi_rma.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ft {

inline constexpr int exit_skip = 77;

struct Options {
	std::string prov;		/* -p: hints->fabric_attr->prov_name */
	std::string fabric;		/* -F: hints->fabric_attr->name */
	std::string domain;		/* -D: hints->domain_attr->name */
	std::string host = "127.0.0.1"; /* -c: where the server's control channel is; -b: the
					 * address the server listens on */
	bool server = false;		/* -s */
	bool client = false;		/* -c */
	int port = 0;			/* -P: control channel port (0: the server picks) */
	bool verbose = false;		/* -v */
	fi_av_type av_type = FI_AV_TABLE; /* -A table|map */
	int timeout_s = 30;		/* -T: bound of every wait */
	fi_ep_type ep_type = FI_EP_RDM; /* set by a program before its Fabric (ft_dgram) */
};

extern Options opts;

/* Parses the common options; exits 2 with the usage on a bad command line. */
void parse_options(int argc, char **argv, const char *purpose);
/* EFA_FT_INTEROP=1: the two processes run different providers (contrib/libfabric2.sh's
 * interop matrix): what each side chooses from its provider's attributes is agreed with
 * the peer (Fabric::agree, mr_mode, ft_atomic's counts) so that both take the same steps. */
bool interop();

/* "server" or "client", for messages. */
const char *role();

[[noreturn]] void fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
[[noreturn]] void fail_check(const char *file, int line, const char *cond, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
[[noreturn]] void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));	/* always shown */
void debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));	/* with -v */

/* A negative return of a fi_* call fails the test with the call's text and the error. */
int64_t check_fi(int64_t rc, const char *expr, const char *file, int line);

/* A call that must fail with exactly `want` (a negative fabric errno). */
void check_rc(int64_t rc, int64_t want, const char *expr, const char *file, int line);

#define FT_FAIL(...) ::ft::fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define FT_CHECK(cond, ...)                                                              \
	do {                                                                             \
		if (!(cond))                                                             \
			::ft::fail_check(__FILE__, __LINE__, #cond, __VA_ARGS__);         \
	} while (0)
#define FT_CALL(expr) ::ft::check_fi((expr), #expr, __FILE__, __LINE__)
#define FT_EXPECT_RC(expr, want) ::ft::check_rc((expr), (want), #expr, __FILE__, __LINE__)

/* Every wait is bounded: opts.timeout_s unless given. */
class Deadline {
public:
	Deadline() : Deadline(std::chrono::seconds(opts.timeout_s)) {}
	explicit Deadline(std::chrono::milliseconds d) : end_(std::chrono::steady_clock::now() + d)
	{
	}
	bool expired() const { return std::chrono::steady_clock::now() >= end_; }
	int left_ms() const;

private:
	std::chrono::steady_clock::time_point end_;
};

/* Milliseconds since `start`, for checks on how long a blocking call blocked. */
double ms_since(std::chrono::steady_clock::time_point start);

/*
 * Data patterns. Byte `index` of pattern `seed` depends on both, so a message or RMA
 * range is recognised by its content and a byte landing at the wrong offset is caught.
 */
uint8_t pattern_byte(uint32_t seed, size_t index);
void fill_pattern(void *buf, size_t len, uint32_t seed, size_t first_index = 0);
/* True when buf holds the pattern (for polling until RMA data becomes visible). */
bool has_pattern(const void *buf, size_t len, uint32_t seed, size_t first_index = 0);
/* Fails the test, naming `what` and the first wrong byte, unless buf holds the pattern. */
void expect_pattern_at(const char *file, int line, const void *buf, size_t len, uint32_t seed,
		       size_t first_index, const char *what);
/* Fails unless every byte is `value` (canaries around and after received data). */
void expect_bytes_at(const char *file, int line, const void *buf, size_t len, uint8_t value,
		     const char *what);
#define FT_EXPECT_PATTERN(buf, len, seed, first, what) \
	::ft::expect_pattern_at(__FILE__, __LINE__, (buf), (len), (seed), (first), (what))
#define FT_EXPECT_BYTES(buf, len, value, what) \
	::ft::expect_bytes_at(__FILE__, __LINE__, (buf), (len), (value), (what))

inline constexpr uint8_t canary = 0xa5;

/* Names for messages. */
std::string caps_str(uint64_t caps);
std::string flags_str(uint64_t flags);

} // namespace ft
