/* hololink/module/status.h: the status codes of Holoscan Sensor Bridge's module API, for
 * RoceReceiverInterfaceV1::start (docs/hololink.md).
 *
 * The values are those of Holoscan Sensor Bridge's
 * hololink_module/host/include/hololink/module/status.h, so that code comparing against them
 * behaves the same.  A plain C header: identical macro and typedef redefinitions are allowed, so
 * it may meet Holoscan Sensor Bridge's own status.h in one file. */
#ifndef MLX5DIRECT_HOLOLINK_STATUS_H
#define MLX5DIRECT_HOLOLINK_STATUS_H

#include <stdint.h>

typedef uint32_t hololink_module_status_t;

#define HOLOLINK_MODULE_OK                  ((hololink_module_status_t)0)
#define HOLOLINK_MODULE_INVALID_PARAMETER   ((hololink_module_status_t)1)
#define HOLOLINK_MODULE_NOT_FOUND           ((hololink_module_status_t)2)
#define HOLOLINK_MODULE_NETWORK_ERROR       ((hololink_module_status_t)3)
#define HOLOLINK_MODULE_TIMEOUT             ((hololink_module_status_t)4)
#define HOLOLINK_MODULE_ABI_MISMATCH        ((hololink_module_status_t)5)
#define HOLOLINK_MODULE_INIT_FAILED         ((hololink_module_status_t)6)

#endif
