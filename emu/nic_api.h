/* nic_api.h: the emulated NIC's control API lives in the emulator's public header, in the
 * section the NIC half appended to it (fault injection, port state, wire capture, statistics). */
#ifndef MLXD_EMU_NIC_API_H
#define MLXD_EMU_NIC_API_H
#include "mlxd_emu.h"
#endif
