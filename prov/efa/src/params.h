/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Every FI_EFA_* parameter, declared once: name, type, default and help. The provider
 * registers them with fi_param_define() (so `fi_info -e` lists them), reads them once,
 * and man/fi_efa.7.md documents each (a unit test checks that none is missing).
 */
#ifndef EFA_PARAMS_H
#define EFA_PARAMS_H

#include <cstddef>
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
	  "'all'")

namespace efa {

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
