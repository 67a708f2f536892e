/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Logging for every layer of the provider. Messages go to libfabric's fi_log() (so
 * FI_LOG_LEVEL and FI_LOG_SUBSYS apply) once the provider is registered; unit tests
 * install a sink of their own to assert on what is logged. Formatting happens only when
 * the level is enabled, so a disabled log line on the data path costs one branch.
 */
#ifndef EFA_LOG_H
#define EFA_LOG_H

#include <atomic>

namespace efa::log {

enum class Level { Warn, Trace, Info, Debug }; /* the order of enum fi_log_level */
enum class Sub { Core, Fabric, Domain, EpCtrl, EpData, Av, Cq, Eq, Mr, Cntr };

using Sink = void (*)(Level, Sub, const char *func, int line, const char *msg);

/* Replaces the sink (nullptr restores fi_log). Returns the previous one. */
Sink set_sink(Sink s);
bool enabled(Level l, Sub s);
void write(Level l, Sub s, const char *func, int line, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

} // namespace efa::log

#define EFA_LOG_(lvl, sub, ...)                                                                   \
	do {                                                                                      \
		if (::efa::log::enabled(::efa::log::Level::lvl, ::efa::log::Sub::sub))           \
			::efa::log::write(::efa::log::Level::lvl, ::efa::log::Sub::sub, __func__, __LINE__, __VA_ARGS__); \
	} while (0)
#define EFA_WARN(sub, ...) EFA_LOG_(Warn, sub, __VA_ARGS__)
#define EFA_INFO(sub, ...) EFA_LOG_(Info, sub, __VA_ARGS__)
#define EFA_DBG(sub, ...) EFA_LOG_(Debug, sub, __VA_ARGS__)
/* A rejection on the data path: a warning the first time this line refuses a call (what
 * to do), debug lines after it, so a retry loop does not flood the log. */
#define EFA_WARN_ONCE(sub, ...)                                                                   \
	do {                                                                                      \
		static std::atomic<bool> efa_warned_{false};                                      \
		if (!efa_warned_.exchange(true, std::memory_order_relaxed))                       \
			EFA_WARN(sub, __VA_ARGS__);                                               \
		else                                                                              \
			EFA_DBG(sub, __VA_ARGS__);                                                \
	} while (0)

#endif
