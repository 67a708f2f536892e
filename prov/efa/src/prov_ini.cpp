/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The one symbol libefa-fi.so exports: libfabric calls it when it loads the provider. */
#include "builtin.h"
#include "params.h"
#include "prov.h"

extern "C" __attribute__((visibility("default"))) fi_provider *fi_prov_ini(void)
{
	efa::params_define(&efa::g_prov);
	efa::log_builtin_efa();
	return &efa::g_prov;
}
