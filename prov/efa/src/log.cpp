/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "log.h"

#include "prov.h"

#include <rdma/providers/fi_log.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace efa::log {

namespace {
std::atomic<Sink> g_sink{nullptr};
}

Sink set_sink(Sink s) { return g_sink.exchange(s); }

bool enabled(Level l, Sub s)
{
	if (g_sink.load(std::memory_order_relaxed))
		return true;
	return fi_log_enabled(&efa::g_prov, fi_log_level(int(l)), fi_log_subsys(int(s)));
}

void write(Level l, Sub s, const char *func, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (Sink sink = g_sink.load(std::memory_order_relaxed)) {
		sink(l, s, func, line, msg);
		return;
	}
	fi_log(&efa::g_prov, fi_log_level(int(l)), fi_log_subsys(int(s)), func, line, "%s\n", msg);
}

} // namespace efa::log
