/* Temporary stand-ins for the NIC half's hooks (emu.h), so the kernel half links before the
 * engine exists.  The NIC half deletes this file when it implements the hooks. */
#include <errno.h>
#include "emu.h"

int  emu_nic_device_open(struct emu_device *dev) { (void)dev; return 0; }
void emu_nic_device_close(struct emu_device *dev) { (void)dev; }
int  emu_nic_cq_create(struct emu_cq *cq) { (void)cq; return 0; }
void emu_nic_cq_destroy(struct emu_cq *cq) { (void)cq; }
int  emu_nic_qp_create(struct emu_qp *qp) { (void)qp; return 0; }
void emu_nic_qp_modified(struct emu_qp *qp, uint32_t old_state) { (void)qp; (void)old_state; }
void emu_nic_qp_destroy(struct emu_qp *qp) { (void)qp; }
void emu_nic_port_event(struct emu_device *dev, bool up) { (void)dev; (void)up; }
