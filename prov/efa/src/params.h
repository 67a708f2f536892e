/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Every FI_EFA_* parameter, declared once: name, type, default and help. The provider
 * registers them with fi_param_define() (so `fi_info -e` lists them), reads them once,
 * and man/fi_efa.7.md documents each (a unit test checks that none is missing).
 */
#ifndef EFA_PARAMS_H
#define EFA_PARAMS_H

#include <cstddef>
#include <cstdint>
#include <string>

struct fi_provider;

/* X(field, NAME, type: STR|INT|BOOL|SIZE, default, help) */
#define EFA_PARAM_TABLE(X)                                                                                 \
	X(sim, "sim", STR, "auto",                                                                          \
	  "Which device to use: 'auto' uses hardware EFA devices when present, otherwise the software "     \
	  "EFA device when the application or FI_PROVIDER selected the efa provider explicitly; '1' always " \
	  "the software device; '0' never")                                                                 \
	X(sim_path, "sim_path", STR, "",                                                                    \
	  "Path of the software device library libefasim.so (default: the directory of libefa-fi.so, then " \
	  "the library search path)")                                                                       \
	X(iface, "iface", STR, "all",                                                                       \
	  "Comma-separated list of device names the provider may use (for example efasim0,rdmap16s27), or " \
	  "'all'")                                                                                          \
	X(rx_pkt_pool_size, "rx_pkt_pool_size", SIZE, "256",                                                  \
	  "efa fabric: receive packet buffers (one MTU each) an endpoint keeps posted to its device; "       \
	  "more absorb bursts from many peers without receiver-not-ready retries")                           \
	X(tx_pkt_pool_size, "tx_pkt_pool_size", SIZE, "256",                                                  \
	  "efa fabric: transmit packet buffers (one MTU each) per endpoint, the packets it can have in "     \
	  "flight; sends return -FI_EAGAIN when they are all in use")                                        \
	X(rx_copy_max, "rx_copy_max", SIZE, "33554432",                                                     \
	  "efa fabric: bytes per endpoint of received packets kept for later (out of order, or an "         \
	  "unexpected message's); beyond, the receive buffers themselves are kept (all but 16), and "      \
	  "senders meet receiver-not-ready until the application takes its messages")                      \
	X(tx_min_credits, "tx_min_credits", SIZE, "32",                                                       \
	  "efa fabric: packets a long message's receiver allows per clear-to-send window")                 \
	X(recvwin_size, "recvwin_size", SIZE, "16384",                                                        \
	  "efa fabric: reorder window per peer, in messages (a power of two); requests further ahead wait " \
	  "on an overflow list")                                                                            \
	X(max_medium_msg_size, "inter_max_medium_message_size", SIZE, "",                                     \
	  "efa fabric: largest message sent with the medium protocol (all packets at once); larger ones "   \
	  "use the read-based protocol or clear-to-send flow control. Unset: 65536 on EFA hardware (as "    \
	  "upstream) and on the software device")                                                           \
	X(min_read_msg_size, "inter_min_read_message_size", SIZE, "",                                      \
	  "efa fabric: smallest message sent with the read-based protocol (the receiver RDMA-reads the "    \
	  "sender's buffer) when both devices have RDMA read. Unset: 1048576 on EFA hardware (as "          \
	  "upstream), 65536 on the software device (medium comes first: from 65537 there)")           \
	X(timeout_interval, "timeout_interval", SIZE, "0",                                                    \
	  "efa fabric: first backoff after a receiver-not-ready, in microseconds (0: random 40-120)")       \
	X(max_timeout, "max_timeout", SIZE, "1000000",                                                        \
	  "efa fabric: longest backoff after repeated receiver-not-ready, in microseconds")                \
	X(use_unsolicited_write_recv, "use_unsolicited_write_recv", BOOL, "1",                                \
	  "Use the device's unsolicited write receive where it has it (a remote write with data then "      \
	  "consumes no receive). 0: endpoints go without it, as FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV "      \
	  "false does (fewer unsolicited completions to overflow a CQ); efa-direct then asks for "          \
	  "FI_RX_CQ_DATA with RMA")                                                                         \
	X(mr_cache_enable, "mr_cache_enable", BOOL, "1",                                                      \
	  "efa fabric: cache the registrations the provider makes for itself (read-based messages, "        \
	  "RDMA read destinations) when a memory monitor (userfaultfd) is available; 0: register and "     \
	  "deregister per use")                                                                             \
	X(mr_max_cached_count, "mr_max_cached_count", SIZE, "",                                              \
	  "efa fabric: most registrations the cache keeps (unset: 90% of the device's max_mr, at most "     \
	  "4096); unused ones are evicted least recently used first, ones in use never")                    \
	X(mr_max_cached_size, "mr_max_cached_size", SIZE, "",                                                \
	  "efa fabric: most bytes the cache keeps registered (unset: 90% of the device's max_mr_size)")     \
	X(enable_shm_transfer, "enable_shm_transfer", BOOL, "1",                                              \
	  "efa fabric: messages, RMA and atomics to peers on this host (the same device GID) go through "  \
	  "libfabric's shm provider instead of the device. Every process of a job must use the same "      \
	  "setting and the same libfabric")                                                                \
	X(fork_safe, "fork_safe", STR, "auto",                                                                 \
	  "rdma-core's fork support on a kernel that does not copy registered pages on fork (before "     \
	  "5.13): 'auto' turns it on at the first domain, '1' as well and fi_domain fails when it cannot "  \
	  "(memory was registered before), '0' leaves it off (a fork() during transfers can then corrupt " \
	  "them). Not needed, and not used, on newer kernels")                                              \
	X(report_signal, "report_signal", STR, "",                                                          \
	  "efa fabric: a signal (SIGUSR1, SIGUSR2, SIGURG, SIGWINCH, SIGPWR, SIGXCPU, SIGPROF, SIGVTALRM or " \
	  "a number) on which every endpoint writes a hang report at its next progress; unset: none")     \
	X(report_path, "report_path", STR, "",                                                              \
	  "efa fabric: file hang reports are appended to (%p: the process id); unset: the libfabric log, " \
	  "at warning level")                                                                               \
	X(report_age, "report_age", SIZE, "5",                                                               \
	  "efa fabric: seconds an operation must have waited to be listed in a hang report")               \
	X(report_at_close, "report_at_close", BOOL, "0",                                                    \
	  "efa fabric: write a hang report when an endpoint is closed with operations in progress, and " \
	  "at exit for one never closed")                                                                   \
	X(peer_probe_interval, "peer_probe_interval", SIZE, "1000",                                           \
	  "efa fabric: milliseconds an operation waits on a silent peer before the provider probes it; "   \
	  "a peer whose device then stops answering is declared unresponsive and everything waiting on "    \
	  "it fails (0: never probe)")

namespace efa {

/* A SIZE parameter whose default is "" reads kParamUnset until the environment sets it
 * (its default then depends on the device). */
inline constexpr size_t kParamUnset = SIZE_MAX;

struct Params {
#define EFA_P_STR std::string
#define EFA_P_INT int
#define EFA_P_BOOL bool
#define EFA_P_SIZE size_t
#define EFA_X(field, name, type, def, help) EFA_P_##type field;
	EFA_PARAM_TABLE(EFA_X)
#undef EFA_X
};

/* Registers every parameter with libfabric. */
void params_define(const fi_provider *prov);
/* Reads the environment once (later calls return the same values). */
const Params &params();
/* The parameter names, without the FI_EFA_ prefix, for documentation checks. */
const char *const *param_names(size_t *count);

} // namespace efa

#endif
