/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Options, failure reporting, deadlines and data patterns shared by the tests. */
#include "ft.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ft {

Options opts;

namespace {

const char *g_prog = "fabtest";

void vprint(FILE *f, const char *kind, const char *fmt, va_list ap)
{
	/* One fprintf per line, so server and client output interleave by line. */
	char msg[2048];
	vsnprintf(msg, sizeof msg, fmt, ap);
	fprintf(f, "[%s %s] %s%s\n", g_prog, role(), kind, msg);
	fflush(f);
}

[[noreturn]] void usage(const char *purpose, int rc)
{
	fprintf(rc ? stderr : stdout,
		"%s: %s\n"
		"usage: %s -s [options]               run the server (prints 'PORT <n>')\n"
		"       %s -c 127.0.0.1 -P <n> [options] run the client\n"
		"  -p PROV     provider name hint (e.g. efa, \"tcp;ofi_rxm\")\n"
		"  -F FABRIC   fabric name hint (e.g. efa-direct)\n"
		"  -D DOMAIN   domain name hint (e.g. lo)\n"
		"  -P PORT     control channel port (server: default 0, any free port)\n"
		"  -b ADDR     server: the IPv4 address its control channel listens on (default\n"
		"              127.0.0.1; another one across network namespaces)\n"
		"  -A TYPE     address vector type: table (default) or map\n"
		"  -T SECONDS  bound of every wait (default 30)\n"
		"  -v          verbose\n",
		g_prog, purpose, g_prog, g_prog);
	exit(rc);
}

} // namespace

const char *role()
{
	return opts.server ? "server" : opts.client ? "client" : "-";
}

bool interop()
{
	static const bool on = [] {
		const char *v = getenv("EFA_FT_INTEROP");
		return v && !strcmp(v, "1");
	}();
	return on;
}

void parse_options(int argc, char **argv, const char *purpose)
{
	const char *slash = strrchr(argv[0], '/');
	g_prog = slash ? slash + 1 : argv[0];
	int c;
	while ((c = getopt(argc, argv, "p:F:D:sc:b:P:A:T:vh")) != -1) {
		switch (c) {
		case 'p': opts.prov = optarg; break;
		case 'F': opts.fabric = optarg; break;
		case 'D': opts.domain = optarg; break;
		case 's': opts.server = true; break;
		case 'c': opts.client = true; opts.host = optarg; break;
		case 'b': opts.host = optarg; break;
		case 'P': opts.port = atoi(optarg); break;
		case 'v': opts.verbose = true; break;
		case 'T': opts.timeout_s = atoi(optarg); break;
		case 'A':
			if (!strcmp(optarg, "table"))
				opts.av_type = FI_AV_TABLE;
			else if (!strcmp(optarg, "map"))
				opts.av_type = FI_AV_MAP;
			else
				usage(purpose, 2);
			break;
		case 'h': usage(purpose, 0);
		default: usage(purpose, 2);
		}
	}
	if (optind != argc || opts.server == opts.client || opts.timeout_s <= 0 ||
	    (opts.client && opts.port <= 0) || opts.port < 0 || opts.port > 65535)
		usage(purpose, 2);
}

void fail_at(const char *file, int line, const char *fmt, ...)
{
	char where[512];
	snprintf(where, sizeof where, "FAIL at %s:%d: ", file, line);
	va_list ap;
	va_start(ap, fmt);
	vprint(stderr, where, fmt, ap);
	va_end(ap);
	exit(1);
}

void fail_check(const char *file, int line, const char *cond, const char *fmt, ...)
{
	char msg[1536];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fail_at(file, line, "%s (check '%s' failed)", msg, cond);
}

void skip(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprint(stdout, "SKIP: ", fmt, ap);
	va_end(ap);
	exit(exit_skip);
}

void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprint(stdout, "", fmt, ap);
	va_end(ap);
}

void debug(const char *fmt, ...)
{
	if (!opts.verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	vprint(stdout, "", fmt, ap);
	va_end(ap);
}

int64_t check_fi(int64_t rc, const char *expr, const char *file, int line)
{
	if (rc < 0)
		fail_at(file, line, "%s returned %lld (%s)", expr, (long long)rc,
			fi_strerror(int(-rc)));
	return rc;
}

void check_rc(int64_t rc, int64_t want, const char *expr, const char *file, int line)
{
	if (rc != want)
		fail_at(file, line, "%s returned %lld (%s), expected %lld (%s)", expr,
			(long long)rc, rc < 0 ? fi_strerror(int(-rc)) : "success",
			(long long)want, want < 0 ? fi_strerror(int(-want)) : "success");
}

int Deadline::left_ms() const
{
	auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
		end_ - std::chrono::steady_clock::now());
	return left.count() > 0 ? int(left.count()) : 0;
}

double ms_since(std::chrono::steady_clock::time_point start)
{
	return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
		.count();
}

uint8_t pattern_byte(uint32_t seed, size_t index)
{
	/* A cheap mix of both; consecutive seeds and indices give unrelated bytes. */
	uint32_t x = uint32_t(index) * 2654435761u ^ (seed + 0x9e3779b9u) * 40503u;
	x ^= x >> 15;
	x ^= uint32_t(index >> 32) + (seed << 7);
	return uint8_t(x ^ (x >> 8) ^ (x >> 16));
}

void fill_pattern(void *buf, size_t len, uint32_t seed, size_t first_index)
{
	auto *p = static_cast<uint8_t *>(buf);
	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(seed, first_index + i);
}

bool has_pattern(const void *buf, size_t len, uint32_t seed, size_t first_index)
{
	auto *p = static_cast<const volatile uint8_t *>(buf);
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, first_index + i))
			return false;
	return true;
}

void expect_pattern_at(const char *file, int line, const void *buf, size_t len, uint32_t seed,
		       size_t first_index, const char *what)
{
	auto *p = static_cast<const uint8_t *>(buf);
	for (size_t i = 0; i < len; i++) {
		uint8_t want = pattern_byte(seed, first_index + i);
		if (p[i] != want)
			fail_at(file, line,
				"%s: byte %zu of %zu is 0x%02x, expected 0x%02x (pattern %u)", what,
				i, len, p[i], want, seed);
	}
}

void expect_bytes_at(const char *file, int line, const void *buf, size_t len, uint8_t value,
		     const char *what)
{
	auto *p = static_cast<const uint8_t *>(buf);
	for (size_t i = 0; i < len; i++)
		if (p[i] != value)
			fail_at(file, line,
				"%s: byte %zu of %zu is 0x%02x, expected 0x%02x (untouched)", what,
				i, len, p[i], value);
}

std::string caps_str(uint64_t caps)
{
	return fi_tostr(&caps, FI_TYPE_CAPS);
}

std::string flags_str(uint64_t flags)
{
	/* fi_tostr's FI_TYPE_OP_FLAGS names FI_SEND etc.; FI_TYPE_CAPS covers the rest. */
	std::string s = fi_tostr(&flags, FI_TYPE_CAPS);
	return s.empty() ? "0" : s;
}

} // namespace ft
