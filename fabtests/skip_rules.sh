# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# What the efa provider is allowed to leave out, sourced by run_pair.sh (and so by every
# suite built on it: run_suite*.sh, run_fault_matrix.sh, prov/efa/test/run_netns.sh).
#
# A fabtest says that it could not run, or ran only in part, in three ways:
#   exit 77, "SKIP: ... does not advertise CAPS ..."   the provider lacks what it needs
#   "SKIP part: <why>"                                 a part left out
#   "provider does not advertise CAPS: ..."            an optional capability missing
# On another provider that is information. On efa it is a failure, unless the fabric is
# documented (fi_efa(7)) not to offer those capabilities on the device generation in
# use: a fabric that stopped offering, say, FI_ATOMIC must not leave the suites green.
#
# The device generation: EFASIM_PROFILE (efasim(7); "default" when unset) on the
# software device; "hardware" with FI_EFA_SIM=0, where any generation may be present.
#
# efa_skip_rule FABRIC WHAT
#   WHAT: "exit 77: <the program's SKIP line>" or a note the program printed. Prints the
#   documented reason and returns 0 when allowed; returns 1 otherwise.

efa_device_generation() {
	if [ "${FI_EFA_SIM:-}" = 0 ]; then
		echo hardware
	else
		echo "${EFASIM_PROFILE:-default}"
	fi
}

efa_skip_rule() {
	_fabric=$1 _what=$2
	case $_what in
	"exit 77: "*"does not advertise "* | "provider does not advertise "*) ;;
	*) return 1 ;; # a part left out, a deviation, or a skip for another reason
	esac
	case $_fabric in
	efa-direct | "")
		# efa-direct exposes the device as it is (fi_efa(7) EFA-DIRECT): no tagged
		# messages, atomics, multi-receive or directed receive, no FI_RMA_EVENT.
		case $_what in
		*FI_TAGGED* | *FI_ATOMIC* | *FI_MULTI_RECV* | *FI_DIRECTED_RECV* | *FI_RMA_EVENT*)
			echo "efa-direct offers no FI_TAGGED, FI_ATOMIC, FI_MULTI_RECV, FI_DIRECTED_RECV or FI_RMA_EVENT"
			return 0 ;;
		esac
		# FI_RMA only where the device has RDMA read and write.
		case $(efa_device_generation):$_what in
		no-rdma-write:*FI_RMA* | no-rdma:*FI_RMA* | hardware:*FI_RMA*)
			echo "efa-direct has no FI_RMA on a device without RDMA read and write ($(efa_device_generation))"
			return 0 ;;
		esac ;;
	esac
	# The efa fabric emulates what a device lacks: it may leave nothing out.
	return 1
}
