/* hololink/module/module.hpp: a Module is where services are looked up (the service locator of
 * Holoscan Sensor Bridge's module API, hololink_module/host/include/hololink/module/module.hpp).
 *
 * Module is the abstract lookup; ServiceModule (service_module.hpp) is this library's concrete
 * one, and the process's default Module, which ConfigurableService<T>::get_service(metadata)
 * uses, is a ServiceModule that constructs the mlx5direct receiver (docs/hololink.md).
 * Modules are always held by std::shared_ptr; services refer to theirs weakly
 * (ServiceBase::module()). */
#ifndef MLX5DIRECT_HOLOLINK_MODULE_HPP
#define MLX5DIRECT_HOLOLINK_MODULE_HPP

#include "mlx5direct_guard.hpp"

#include <memory>

namespace hololink::module {
inline namespace mlx5direct {

class Module : public std::enable_shared_from_this<Module> {
public:
    virtual ~Module() = default;

    /* The service published under (instance_id, type_id), constructed on a miss when the module
     * can.  The pointer addresses the object as the type named by type_id (Service<T> casts it
     * back).  No entry: an empty pointer when allow_null, else std::runtime_error naming both
     * ids. */
    virtual std::shared_ptr<const void> get_service(const char *instance_id, const char *type_id,
                                                    bool allow_null = false) = 0;
};

} // namespace mlx5direct
} // namespace hololink::module

#endif
