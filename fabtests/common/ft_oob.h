/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The control channel (ft_channel.h) with the efa-direct programs' endpoint (ft_ep.h). */
#pragma once

#include "ft_channel.h"
#include "ft_ep.h"
